"""A rental moved from a degraded or failed node to a spare one: the move's status table and its one writer, and
the orchestration an operator starts (console, API, `manage.py node_move`).

move_start takes a free node for the order (a hold like the preparation's) and a preparation run on it; the
move's own job (move_execute) runs that run's steps, the order's preparation and full preflight and the grant
(the order stays active: prepare.preparation_conclude leaves an active order alone), then copies the tenant's
files node to node (provisioning/move_copy.py), then hands over in one transaction and asks for the old node's
clean end of rental. A spare that fails its preflight is set aside as failed and the next free node is tried;
with none free the move ends `no_node`, the customer is told, and staff see it under "Needs attention".

Idempotent and resumable: each step reads where the move stands, so a job that runs again continues.
Lock order, as everywhere: nodes, then the order, then the move.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from core.log_context import log_context
from core.transition_event import status_move
from fleet.models import Node, NodeState
from orders import capacity
from orders.models import Order, OrderStatus
from orders.outbox import email_enqueue
from provisioning.access import access_withdraw_request
from provisioning.data_window import data_until
from provisioning.downtime import downtime_episode_close
from provisioning.end_notice import move_notice_queue
from provisioning.manifest import manifest_change
from provisioning.models import OPEN_MOVES, AccessGrant, MoveStatus, NodeMove, NodeMoveEvent, PreparationRun, RunStatus
from provisioning.move_copy import move_copy
from provisioning.prepare import OPEN_RUNS, preparation_execute
from provisioning.states import nodes_transition

log = logging.getLogger(__name__)
M = MoveStatus
# A rented node may be moved away from while it is failing its health probe or an operator marked it failed.
MOVABLE_STATES = (NodeState.DEGRADED, NodeState.FAILED)

MOVE_TRANSITIONS: dict[str, frozenset[str]] = {
    # A spare is taken at once, or none is free; an order that stopped being active meanwhile ends it.
    M.REQUESTED: frozenset({M.PREPARING, M.NO_NODE, M.FAILED}),
    # The spare passed (its data is copied next); none left after the spares failed; the order's key was refused.
    M.PREPARING: frozenset({M.COPYING, M.NO_NODE, M.FAILED}),
    M.COPYING: frozenset({M.HANDING_OVER, M.FAILED}),
    M.HANDING_OVER: frozenset({M.DONE, M.FAILED}),
    # Ended: an operator starts a new move (the partial unique index allows one open move per node).
    M.DONE: frozenset(),
    M.FAILED: frozenset(),
    M.NO_NODE: frozenset(),
}
MOVE_OUTCOMES = frozenset({M.DONE, M.FAILED, M.NO_NODE})


class MoveRefused(Exception):
    """The move cannot start, in words an operator can act on."""


class MoveWaiting(Exception):
    """The spare's run is held by another live worker: the move's job tries again later."""


def move_transition(
    *, move: NodeMove, to: str, actor: str, reason: str = "", now: dt.datetime | None = None, **also: object
) -> bool:
    """Move the move to `to` and record it; False (nothing written) when it is there already. The caller holds
    the move's row lock. `also`: fields that change with it (the spare, its run, the error)."""
    now = now or timezone.now()
    if to in MOVE_OUTCOMES:
        also["finished_at"] = now
    return status_move(
        row=move,
        to=to,
        table=MOVE_TRANSITIONS,
        event_model=NodeMoveEvent,
        link="move",
        actor=actor,
        reason=reason,
        now=now,
        label=f"move {move.pk}",
        own_transaction=True,
        also=also,
    )


def move_for_node(*, node: Node, actor: str, reason: str = "") -> NodeMove:
    """The operator's entry: the rental whose handed-over access is on the node moves away from it."""
    grant = AccessGrant.objects.handed_over().filter(node=node).select_related("order").first()
    if grant is None:
        raise MoveRefused(f"{node.name} carries no customer's access: there is no rental to move")
    return move_start(order=grant.order, from_node=node, actor=actor, reason=reason)


def move_start(*, order: Order, from_node: Node, actor: str, reason: str = "") -> NodeMove:
    """Start moving `order` off `from_node`: a spare node held and its preparation run queued (or `no_node`).
    MoveRefused, in words, for a node that is not degraded or failed, an order that is not active or holds no
    access there, and a node with a move already open."""
    now = timezone.now()
    try:
        with transaction.atomic():
            capacity.lock_sellable_nodes()
            node = Node.objects.select_for_update().get(pk=from_node.pk)  # out of sale: not among the locks above
            order = Order.objects.select_for_update().get(pk=order.pk)
            _refusal_check(order=order, node=node)
            move = NodeMove.objects.create(
                order=order, from_node=node, requested_by=actor, reason=reason or f"{node.name} is {node.state}"
            )
            _spare_take(move=move, order=order, actor=actor, now=now)
    except IntegrityError:  # another request opened a move on the node between our check and our write
        raise MoveRefused(f"a move of {from_node.name} is already open") from None
    return move


def _refusal_check(*, order: Order, node: Node) -> None:
    if node.state not in MOVABLE_STATES:
        raise MoveRefused(f"{node.name} is {node.state}: only a degraded or failed node's rental is moved")
    if order.status != OrderStatus.ACTIVE:
        raise MoveRefused(f"order {order.reference} is {order.status}: only an active rental is moved")
    if not order.access_grants.handed_over().filter(node=node).exists():
        raise MoveRefused(f"{node.name} carries no live access of {order.reference}")
    open_move = NodeMove.objects.filter(from_node=node, status__in=OPEN_MOVES).first()
    if open_move is not None:
        raise MoveRefused(f"move {open_move.pk} of {node.name} is already open ({open_move.get_status_display()})")


def _spare_take(*, move: NodeMove, order: Order, actor: str, now: dt.datetime) -> bool:
    """Hold a free node for the order and queue its preparation run, or end the move `no_node` (the customer
    emailed). Runs in the caller's transaction, under the node locks and the order's."""
    try:
        (reservation,) = capacity.reserve_lots(order=order, lots=1, expires_at=None, now=now)
    except capacity.SoldOut:
        move_transition(
            move=move,
            to=M.NO_NODE,
            actor="system",
            reason="no spare node is free",
            now=now,
            error="no spare node is free: add or recheck a node, then move again",
        )
        email_enqueue(order_id=order.pk, name="node_move_waiting", params={"move_id": move.pk})
        return False
    spare = reservation.node
    run = PreparationRun.objects.create(order=order, node=spare, requested_by=actor)
    nodes_transition(
        node_ids=[spare.pk],
        to=NodeState.PREPARING,
        actor="system",
        reason=f"preparing {order.reference} in place of {move.from_node.name}",
        now=now,
    )
    move_transition(
        move=move, to=M.PREPARING, actor=actor, reason=f"preparing {spare.name}", now=now, to_node=spare, run=run
    )
    move_notice_queue(move=move, now=now)  # the tenant saves its work before the copy (issue 41): sent first
    job_enqueue(JobKind.NODE_MOVE, move_id=move.pk)
    return True


def move_execute(*, move_id: int) -> str | None:
    """The move's job: each step from where the move stands, until it has ended. Returns its status."""
    move = NodeMove.objects.select_related("order", "from_node").filter(pk=move_id).first()
    if move is None:
        return None
    with log_context(order=move.order.reference, node=move.from_node.name):
        while move.status not in MOVE_OUTCOMES:
            step = STEPS.get(move.status)
            if step is None:  # `requested` lives only inside move_start's transaction
                break
            step(move)
            move.refresh_from_db()
    return move.status


def _prepare_spare(move: NodeMove) -> None:
    """The spare's run (the order's preparation, the full preflight, the grant), then what it ended as."""
    run = move.run
    assert run is not None, "a move prepares its spare only with the spare's run"
    if run.status in OPEN_RUNS:
        preparation_execute(run_id=run.pk)  # its conclusion leaves the active order alone
        run.refresh_from_db()
        if run.status in OPEN_RUNS:
            raise MoveWaiting(f"the run {run.pk} on {run.node.name} is held by another worker")
    _after_run(move_id=move.pk, run=run)


def _after_run(*, move_id: int, run: PreparationRun) -> None:
    now = timezone.now()
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        spare = Node.objects.select_for_update().get(pk=run.node_id)
        order = Order.objects.select_for_update().get(pk=run.order_id)
        move = NodeMove.objects.select_for_update().select_related("from_node").get(pk=move_id)
        if move.status != M.PREPARING or move.run_id != run.pk:
            return  # another attempt moved it on
        if order.status != OrderStatus.ACTIVE:
            _spare_free(order=order, spare=spare, now=now, reason=f"{order.reference} is no longer active")
            move_transition(
                move=move,
                to=M.FAILED,
                actor="system",
                reason="the rental ended meanwhile",
                now=now,
                error=f"order {order.reference} is {order.status}",
            )
            return
        if run.status == RunStatus.PASSED:
            move_transition(
                move=move, to=M.COPYING, actor="system", reason=f"{spare.name} passed its preflight", now=now
            )
            return
        if run.status == RunStatus.REFUSED:  # the order's own key: any node would refuse it
            _spare_free(order=order, spare=spare, now=now, reason=f"the SSH key of {order.reference} was refused")
            move_transition(move=move, to=M.FAILED, actor="system", reason=run.error, now=now, error=run.error)
            return
        # The spare failed its preflight or broke: set aside for the operators, its hold released, any account
        # the grant step made removed, and the next free node tried.
        nodes_transition(node_ids=[spare.pk], to=NodeState.FAILED, actor="system", reason=run.error, now=now)
        capacity.release_lots_on(order=order, node_id=spare.pk, now=now, reason=f"preflight: {run.status}")
        access_withdraw_request(order=order, node_ids=[spare.pk], now=now)
        move.error = f"{spare.name}: {run.error}"[:2000]
        move.save(update_fields=["error"])
        _spare_take(move=move, order=order, actor="system", now=now)


def _spare_free(*, order: Order, spare: Node, now: dt.datetime, reason: str) -> None:
    capacity.release_lots_on(order=order, node_id=spare.pk, now=now, reason=reason)
    if order.access_grants.live().filter(node=spare).exists():
        access_withdraw_request(order=order, node_ids=[spare.pk], now=now)
    else:
        nodes_transition(node_ids=[spare.pk], to=NodeState.AVAILABLE, actor="system", reason=reason, now=now)


def _copy(move: NodeMove) -> None:
    """The tenant's home and scratch files, old node -> worker -> spare (resumable), then the hand-over."""
    old = AccessGrant.objects.handed_over().select_related("node").filter(order=move.order, node=move.from_node)
    old_grant = old.first()
    spare = move.to_node
    assert spare is not None, "a move copies only once its spare passed"
    report = move_copy(old_grant=old_grant, new_node=spare) if old_grant else {"reachable": False, "copied": []}
    with transaction.atomic():
        locked = NodeMove.objects.select_for_update().get(pk=move.pk)
        if locked.status != M.COPYING:
            return
        locked.copy_report = report
        locked.save(update_fields=["copy_report"])
        move_transition(move=locked, to=M.HANDING_OVER, actor="system", reason=report.get("summary", ""))


def _hand_over(move: NodeMove) -> None:
    """One transaction: the old node's downtime credited, the spare in use with the rental's end, a manifest
    revision naming both nodes, the customer's email; then the old node's clean end of rental as a job."""
    now = timezone.now()
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        both = Node.objects.select_for_update().filter(pk__in=[move.from_node_id, move.to_node_id])
        nodes = list(both.order_by("pk"))  # out of sale or preparing: not among the sellable locks above
        order = Order.objects.select_for_update().get(pk=move.order_id)
        move = NodeMove.objects.select_for_update(of=("self",)).select_related("from_node", "to_node").get(pk=move.pk)
        old, spare = move.from_node, move.to_node
        if move.status != M.HANDING_OVER or spare is None or not nodes:
            return
        if order.status != OrderStatus.ACTIVE:
            _spare_free(order=order, spare=spare, now=now, reason=f"{order.reference} is no longer active")
            move_transition(
                move=move,
                to=M.FAILED,
                actor="system",
                reason="the rental ended meanwhile",
                now=now,
                error=f"order {order.reference} is {order.status}",
            )
            return
        downtime_episode_close(node_id=old.pk, until=now)  # the old grant is still live: the credit finds it
        order.refresh_from_db()  # the credit moved the end
        nodes_transition(
            node_ids=[spare.pk],
            to=NodeState.IN_USE,
            actor="system",
            reason=f"{order.reference} moved here from {old.name}",
            now=now,
        )
        order.access_grants.handed_over().filter(node=spare).update(ends_at=order.ends_at)
        old_grant = order.access_grants.handed_over().filter(node=old).first()
        manifest_change(
            order=order,
            change_id=f"move-{move.pk}",
            change={
                "kind": "node_move",
                "from_node": old.name,
                "to_node": spare.name,
                "at": now.isoformat(),
                "copied": [f"{item['where']}:{item['path']}" for item in move.copy_report.get("copied", [])],
                "copy_summary": move.copy_report.get("summary", ""),
            },
            runs=_current_runs(order=order, leaving=old),
        )
        if old_grant is not None and not move.copy_report.get("complete", False):
            _old_files_keep(move=move, order=order, old_grant=old_grant, now=now)
        elif old_grant is not None:
            job_enqueue(JobKind.NODE_MOVE_REVOKE, grant_id=old_grant.pk)
        email_enqueue(order_id=order.pk, name="node_moved", params={"move_id": move.pk})
        move_transition(move=move, to=M.DONE, actor="system", reason=f"handed over on {spare.name}", now=now)
    log.info("order %s moved from %s to %s", order.reference, old.name, spare.name)


def _old_files_keep(*, move: NodeMove, order: Order, old_grant: AccessGrant, now: dt.datetime) -> None:
    """The copy left files behind, or the old node did not answer: its files are never wiped on that account
    (issue 39). The tenant is stopped there and its key limited to read-only SFTP until the rental's end (the
    access tool's `grace`, retried until the node answers), so the customer can fetch what was not copied; the
    clean end of rental comes with the rental's end, or sooner when a person releases the files
    (move_old_files_release). Staff see it under "Needs attention"; the customer's email says so."""
    until = data_until(order.ends_at) or order.ends_at
    AccessGrant.objects.filter(pk=old_grant.pk).update(ends_at=order.ends_at, grace_until=until)
    NodeMove.objects.filter(pk=move.pk).update(old_files_kept_at=now)
    move.old_files_kept_at = now
    job_enqueue(JobKind.ACCESS_GRACE, grant_id=old_grant.pk)


class ReleaseRefused(Exception):
    """The old node's files are not kept by this move (never were, already released, or already gone)."""


def move_old_files_release(*, move_id: int, actor: str, now: dt.datetime | None = None) -> NodeMove:
    """A person decided: the files the move left on the old node may go. Its clean end of rental starts now (the
    account, its files and processes removed, the node proven clean), recorded with who decided."""
    now = now or timezone.now()
    with transaction.atomic():
        move = NodeMove.objects.select_for_update().select_related("order", "from_node").get(pk=move_id)
        grant = move.order.access_grants.handed_over().filter(node=move.from_node).first()
        if move.old_files_kept_at is None or move.old_files_released_at is not None or grant is None:
            raise ReleaseRefused(f"move {move.pk} keeps no files on {move.from_node.name}: nothing to release")
        move.old_files_released_by, move.old_files_released_at = actor, now
        move.save(update_fields=["old_files_released_by", "old_files_released_at"])
        job_enqueue(JobKind.NODE_MOVE_REVOKE, grant_id=grant.pk)
    log.info("move %s: %s released the files kept on %s", move.pk, actor, move.from_node.name)
    return move


def moves_keeping_files() -> list[NodeMove]:
    """Moves whose old node still keeps files the copy left behind, waiting on a person's decision."""
    still_there = AccessGrant.objects.handed_over().filter(order=OuterRef("order"), node=OuterRef("from_node"))
    kept = NodeMove.objects.filter(old_files_kept_at__isnull=False, old_files_released_at__isnull=True)
    return list(kept.filter(Exists(still_there)).select_related("order", "from_node").order_by("old_files_kept_at"))


def _current_runs(*, order: Order, leaving: Node) -> list[PreparationRun]:
    """The latest passed run on each node the rental is on after the move (the spare's included)."""
    node_ids = order.access_grants.handed_over().exclude(node=leaving).values_list("node_id", flat=True)
    passed = order.preparation_runs.filter(status=RunStatus.PASSED, node_id__in=list(node_ids))
    latest: dict[int, PreparationRun] = {}
    for run in passed.select_related("node").order_by("created_at"):
        latest[run.node_id] = run
    return sorted(latest.values(), key=lambda run: run.node.name)


STEPS: dict[str, Callable[[NodeMove], None]] = {
    M.PREPARING: _prepare_spare,
    M.COPYING: _copy,
    M.HANDING_OVER: _hand_over,
}


def moves_open() -> list[NodeMove]:
    """The console's list: moves still running, with their run's progress."""
    moves = NodeMove.objects.filter(status__in=OPEN_MOVES).select_related("order", "from_node", "to_node", "run")
    return list(moves.order_by("created_at"))


def moves_waiting() -> list[NodeMove]:
    """Moves that ended without a spare (none free, or the spares failed) while the rental is still on the old
    node: the customer waits on a person ("Needs attention"). A later move of the node replaces its entry."""
    latest = NodeMove.objects.filter(from_node=OuterRef("from_node")).order_by("-created_at", "-pk").values("pk")[:1]
    ended = NodeMove.objects.filter(status__in=(M.NO_NODE, M.FAILED), pk=Subquery(latest))
    still_there = AccessGrant.objects.handed_over().filter(order=OuterRef("order"), node=OuterRef("from_node"))
    return list(ended.filter(Exists(still_there)).select_related("order", "from_node").order_by("created_at"))


def nodes_movable(nodes: list[Node]) -> set[int]:
    """Of these nodes, those whose rental an operator may move now: degraded or failed, carrying a customer's
    handed-over access of an active order, with no move open."""
    candidates = [node.pk for node in nodes if node.state in MOVABLE_STATES]
    rented = AccessGrant.objects.handed_over().filter(node__in=candidates, order__status=OrderStatus.ACTIVE)
    moving = NodeMove.objects.filter(from_node__in=candidates, status__in=OPEN_MOVES).values_list("from_node_id")
    return set(rented.exclude(node__in=moving).values_list("node_id", flat=True))

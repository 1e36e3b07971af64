"""From a paid order to working access: preparation_start, then one run per node, moving to a free
node when one fails, and the hand-over when every node passed.

Lock order, as everywhere: nodes, then the order. Runs do their slow work (SSH, the preflight)
outside any transaction and write their progress as they go.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from core.log_context import log_context
from core.transition_event import TransitionNotAllowed
from fleet.models import Node, NodeState
from orders import capacity
from orders.models import Order, OrderStatus
from orders.orders import order_transition
from orders.outbox import email_enqueue
from provisioning.access import (
    AccessKeyRefused,
    access_handover,
    access_key_line,
    access_withdraw_request,
)
from provisioning.claims import Claim, run_claim, run_orphaned, run_release
from provisioning.drivers import driver_for
from provisioning.drivers.base import DriverError
from provisioning.models import AccessGrant, PreparationRun, RunStatus
from provisioning.node_steps import NodeJob, steps_run
from provisioning.states import nodes_transition, run_transition

log = logging.getLogger(__name__)
S = OrderStatus
OPEN_RUNS = (RunStatus.QUEUED, RunStatus.RUNNING)
PREPARATION_RUN = JobKind.PREPARATION_RUN
# The database went away for a moment (a failover, a dropped connection): the step is retried, and the node
# is never blamed for it.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


class PreparationError(Exception):
    """Something an operator can act on, in words."""


def preparation_start(*, order_id: int, actor: str, only_paid: bool = False) -> list[PreparationRun]:
    """Paid (or failed before) -> preparing, one queued run per held node. On an order already preparing it
    restarts what is stuck (the operator's button): repeating it is harmless. `only_paid`: an order no longer
    paid is left as it is (the automatic start: an order an operator stopped waits for a person)."""
    now = timezone.now()
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        order = Order.objects.select_for_update().get(pk=order_id)
        if only_paid and order.status != S.PAID:
            return []
        if order.status == S.PREPARING:
            runs = list(order.preparation_runs.filter(status__in=OPEN_RUNS))
            _runs_enqueue(runs)  # a run a live worker holds is left to it (provisioning.claims)
        elif order.status in (S.PAID, S.PREPARATION_FAILED):
            nodes = _held_nodes(order, now)
            order_transition(order=order, to=S.PREPARING, actor=actor, reason="preparation triggered", now=now)
            email_enqueue(order_id=order.pk, name="preparation_started")  # not on a restart: nothing new to say
            runs = [PreparationRun.objects.create(order=order, node=node, requested_by=actor) for node in nodes]
            nodes_transition(
                node_ids=[node.pk for node in nodes],
                to=NodeState.PREPARING,
                actor=actor,
                reason=f"preparing {order.reference}",
                now=now,
            )
            _runs_enqueue(runs)
            return runs
        else:
            raise PreparationError(f"order {order.reference} is {order.status}: only a paid order is prepared")
    if not runs:  # every run ended, yet the order did not move on (the database failed in between)
        preparation_conclude(order_id=order_id, actor=actor)
    return runs


def preparations_resume_stuck(*, now: dt.datetime) -> int:
    """Beat's safety net for what the job outbox cannot see: a run whose worker died holds its job until the
    job's lease ends (longer than a preflight), so a running run with no live worker is sent again at once; and
    orders whose runs all ended are moved on. Returns how many it resumed."""
    since = now - dt.timedelta(seconds=settings.PREPARATION_STUCK_AFTER_SECONDS)
    running = PreparationRun.objects.filter(status=RunStatus.RUNNING, started_at__lt=since)
    runs = [run for run in running if run_orphaned(run)]
    _runs_enqueue(runs)
    ended = Order.objects.filter(status=S.PREPARING, updated_at__lt=since).exclude(
        preparation_runs__status__in=OPEN_RUNS
    )
    orders = list(ended.values_list("pk", flat=True))
    for order_id in orders:
        preparation_conclude(order_id=order_id, actor="system")
    return len(runs) + len(orders)


def _held_nodes(order: Order, now: dt.datetime) -> list[Node]:
    """The order's held nodes, topped up from free ones (a retry after a node failed). Needs the node locks."""
    # A node whose access from the failed attempt is still being removed is not waited for: another is taken.
    for node_id in AccessGrant.objects.withdrawing().filter(order=order).values_list("node_id", flat=True):
        capacity.release_lots_on(order=order, node_id=node_id, now=now, reason="its earlier access is being removed")
    held = [r.node for r in order.reservations.live().select_related("node")]
    missing = order.lots - len(held)
    if missing > 0:
        try:
            added = capacity.reserve_lots(order=order, lots=missing, expires_at=None, now=now)
        except capacity.SoldOut as exc:
            raise PreparationError(
                f"order {order.reference} needs {missing} more node(s) and {exc.available} is/are free"
            ) from None
        held += [reservation.node for reservation in added]
    return held


def _runs_enqueue(runs: list[PreparationRun]) -> None:
    for run in runs:
        job_enqueue(PREPARATION_RUN, run_id=run.pk)


def preparation_execute(*, run_id: int) -> str | None:
    """Run one node's preparation. Idempotent: a finished run, or one a live worker runs, is left alone;
    a run whose worker died starts over as its next attempt (provisioning.claims)."""
    claim = run_claim(run_id=run_id)
    if claim is None:
        # Finished: its outcome may not have reached the order (the database failed in between).
        finished = PreparationRun.objects.exclude(status__in=OPEN_RUNS).filter(pk=run_id).first()
        if finished is not None:
            preparation_conclude(order_id=finished.order_id, actor=finished.requested_by)
        return None
    try:
        return _execute(claim)
    finally:
        run_release(claim)


def _execute(claim: Claim) -> str | None:
    run = PreparationRun.objects.select_related("order__preparation", "node").get(pk=claim.run_id)
    with log_context(order=run.order.reference, node=run.node.name):
        return _execute_run(claim, run)


def _execute_run(claim: Claim, run: PreparationRun) -> str | None:
    try:
        status, report, error = _run_on_node(run, lost_workdir=claim.lost_workdir)
    except TRANSIENT_DB_ERRORS:
        raise  # the database, not the node: the task runs the preparation again as its next attempt
    except AccessKeyRefused as exc:  # the order's own input: its step fails, the node is fine
        status, report, error = RunStatus.REFUSED, None, str(exc)
    except DriverError as exc:  # unreachable, wrong host key, timed out: the node is not handed over
        status, report, error = RunStatus.ERROR, None, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # an unexpected failure is recorded on the run, never left "running"
        log.exception("preparation run %s broke", run.pk)
        status, report, error = RunStatus.ERROR, None, f"unexpected {type(exc).__name__}: {exc}"
    if not _outcome_write(claim, status=status, report=report, error=error):
        return None  # a later attempt took the run over: its outcome counts, not this one's
    preparation_conclude(order_id=run.order_id, actor=run.requested_by)
    return status


def _outcome_write(claim: Claim, *, status: str, report: dict[str, Any] | None, error: str) -> bool:
    """Record the attempt's outcome, if this attempt still holds the run (checked under the run's row lock)."""
    raw = json.dumps(report, sort_keys=True).encode() if report is not None else b""
    with transaction.atomic():
        held = PreparationRun.objects.select_for_update().filter(
            pk=claim.run_id, attempt=claim.attempt, status=RunStatus.RUNNING
        )
        run = held.first()
        if run is None:
            return False
        PreparationRun.objects.filter(pk=run.pk).update(
            report=report,
            report_sha256=hashlib.sha256(raw).hexdigest() if raw else "",
            error=error,
            step="done" if status == RunStatus.PASSED else "stopped",
            progress=100,
        )
        run_transition(run=run, to=status, actor="system", reason=error or "the preflight passed")
    return True


def run_stop_over_time(*, run_id: int) -> None:
    """The task's own time limit struck: a run still running ends in error, whichever attempt holds it."""
    error = "the preparation exceeded its time limit"
    with transaction.atomic():
        running = PreparationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING)
        run = running.select_for_update().first()
        if run is None:
            return
        run.error = error
        run.save(update_fields=["error"])
        run_transition(run=run, to=RunStatus.ERROR, actor="system", reason=error)


def _run_on_node(run: PreparationRun, *, lost_workdir: str = "") -> tuple[str, dict[str, Any] | None, str]:
    """Connect to the node and run the preparation's steps there (provisioning.node_steps)."""
    access_key_line(run.order)  # a key that cannot be installed fails before any node time is spent
    with driver_for(run.node, connect_timeout=settings.NODE_CONNECT_TIMEOUT_SECONDS) as driver:
        PreparationRun.objects.filter(pk=run.pk, attempt=run.attempt).update(node_workdir=driver.workdir)
        return steps_run(NodeJob(run=run, driver=driver, lost_workdir=lost_workdir))


def preparation_conclude(*, order_id: int, actor: str) -> str:
    """After a run ends: hand over when every node passed; move a failed node's lot to a free node;
    with none free, the order is `preparation_failed` and operators see it at once."""
    reference = Order.objects.filter(pk=order_id).values_list("reference", flat=True).first()
    with log_context(order=reference):
        return _preparation_conclude(order_id=order_id, actor=actor)


def _preparation_conclude(*, order_id: int, actor: str) -> str:
    now = timezone.now()
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        order = Order.objects.select_for_update().get(pk=order_id)
        if order.status != S.PREPARING:
            return order.status
        runs = list(order.preparation_runs.select_related("node"))
        if any(run.status in OPEN_RUNS for run in runs):
            return "waiting"
        held = {r.node_id: r for r in order.reservations.live()}
        latest = {}
        for run in sorted(runs, key=lambda r: r.created_at):
            latest[run.node_id] = run
        bad = [run for node_id, run in latest.items() if node_id in held and run.status != RunStatus.PASSED]
        if not bad:
            access_handover(order=order, runs=[latest[node_id] for node_id in held], now=now)
            return S.ACTIVE
        refused = [run for run in bad if run.status == RunStatus.REFUSED]
        broken = [run for run in bad if run.status != RunStatus.REFUSED]
        for run in broken:  # the node is set aside with its report; its lot moves to a free node if there is one
            nodes_transition(node_ids=[run.node_id], to=NodeState.FAILED, actor="system", reason=run.error, now=now)
            capacity.release_lots_on(order=order, node_id=run.node_id, now=now, reason=f"preflight: {run.status}")
        # An account the grant step made before the run broke is removed (the row was written first).
        access_withdraw_request(order=order, node_ids=[run.node_id for run in broken], now=now)
        if refused:  # the order's own input: any node would refuse it, so none is tried in turn or set aside
            nodes_transition(
                node_ids=[run.node_id for run in refused],
                to=NodeState.AVAILABLE,
                actor="system",
                reason=f"the SSH key of {order.reference} was refused; the node is fine",
                now=now,
            )
            return _preparation_failed(order=order, runs=refused + broken, now=now)
        try:
            replacements = capacity.reserve_lots(order=order, lots=len(broken), expires_at=None, now=now)
        except capacity.SoldOut:
            return _preparation_failed(order=order, runs=broken, now=now)
        new_runs = [
            PreparationRun.objects.create(order=order, node=reservation.node, requested_by=actor)
            for reservation in replacements
        ]
        nodes_transition(
            node_ids=[r.node_id for r in replacements],
            to=NodeState.PREPARING,
            actor="system",
            reason=f"preparing {order.reference} in place of a node that failed",
            now=now,
        )
        _runs_enqueue(new_runs)
        return "moved"


def _preparation_failed(*, order: Order, runs: list[PreparationRun], now: dt.datetime) -> str:
    """The order waits for operators, the reason of each run that did not pass in its events. Access given
    on the nodes that passed is withdrawn: nobody holds access without an active order."""
    reason = "; ".join(f"{run.node.name}: {run.error[:200]}" for run in runs)
    if not order_transition(order=order, to=S.PREPARATION_FAILED, actor="system", reason=reason, now=now):
        raise TransitionNotAllowed(f"order {order.reference}: its preparation failed already")
    access_withdraw_request(order=order, now=now)
    # The customer can act only on a refused key (a new one, by reply); a node's fault is the operators' to fix.
    key_refused = any(run.status == RunStatus.REFUSED for run in runs)
    email_enqueue(order_id=order.pk, name="preparation_failed", params={"key_refused": key_refused})
    return S.PREPARATION_FAILED


def preparation_stuck(*, order: Order, now: dt.datetime) -> bool:
    """Whether the console offers "Restart what is stuck" on a preparing order: a run queued longer than
    PREPARATION_STUCK_AFTER_SECONDS (its job never started), a run running that long with no live worker
    (provisioning.claims), or every run ended while the order did not move on. Reads the prefetched runs."""
    since = now - dt.timedelta(seconds=settings.PREPARATION_STUCK_AFTER_SECONDS)
    runs = list(order.preparation_runs.all())
    open_runs = [run for run in runs if run.status in OPEN_RUNS]
    if not open_runs:
        return order.updated_at < since
    for run in open_runs:
        if run.status == RunStatus.QUEUED and run.created_at < since:
            return True
        if run.status == RunStatus.RUNNING and run.started_at and run.started_at < since and run_orphaned(run):
            return True
    return False

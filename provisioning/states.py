"""The node's and the preparation run's status tables, and the one writer of each.

Every change of `Node.state` and `PreparationRun.status` goes through node_transition or run_transition:
each checks its table, saves with update_fields and writes an event row in the same transaction. A move
to the status the row already has is a no-op (no write, no event): the preparation moves whole groups of
nodes, some of which may already be there, and a lost worker's run is taken over while it stays `running`.
Lock order, as everywhere: nodes, then the order.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from core.transition_event import TransitionNotAllowed, status_move
from fleet.models import UNSELLABLE_STATES, Node, NodeEvent, NodeState
from orders.staff_notices import staff_notify
from provisioning.models import PreparationRun, PreparationRunEvent, RunStatus

N = NodeState
R = RunStatus

# Allowed next states of a node, from what the preparation, the access code and the operators do.
NODE_TRANSITIONS: dict[str, frozenset[str]] = {
    # Taken for a preparation; an operator sets it aside; a refused grant's account is being removed; beat's
    # daily probe found it unreachable or its cards busy (provisioning.node_checks).
    N.AVAILABLE: frozenset({N.PREPARING, N.REVOKING, N.MAINTENANCE, N.FAILED}),
    # Set by no code today: a node an operator marked so is sold, prepared and set aside like an available one.
    N.ALLOCATED: frozenset({N.AVAILABLE, N.PREPARING, N.REVOKING, N.MAINTENANCE}),
    # Handed over; failed its preflight; freed (the order's key was refused); its access withdrawn.
    N.PREPARING: frozenset({N.IN_USE, N.FAILED, N.AVAILABLE, N.REVOKING}),
    # The rental ended; access left on an order that is neither preparing nor active is withdrawn; the health
    # probe of the rented node fails (provisioning.rented_node_health).
    N.IN_USE: frozenset({N.AVAILABLE, N.REVOKING, N.DEGRADED}),
    # Its probe passes again; the rental ended or moved away (the clean end of rental, then operators recheck it);
    # an operator sets it aside; access left on an order no longer active is withdrawn.
    N.DEGRADED: frozenset({N.IN_USE, N.FAILED, N.MAINTENANCE, N.REVOKING}),
    N.REVOKING: frozenset({N.AVAILABLE}),
    # Only an operator takes a node out of failed or maintenance (admin actions, or a recheck that passed).
    N.FAILED: frozenset({N.AVAILABLE, N.MAINTENANCE}),
    # ... or a recheck that failed, which sets it aside as failed with the reason.
    N.MAINTENANCE: frozenset({N.AVAILABLE, N.FAILED}),
}

# Allowed next statuses of a preparation run. A run that ended never moves again: a retry is a new run.
RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    R.QUEUED: frozenset({R.RUNNING, R.ERROR}),  # or an operator stops it before it ran (provisioning/auto_prepare.py)
    R.RUNNING: frozenset({R.PASSED, R.FAILED, R.ERROR, R.REFUSED}),
    R.PASSED: frozenset(),
    R.FAILED: frozenset(),
    R.ERROR: frozenset(),
    R.REFUSED: frozenset(),
}

# The run's statuses that are an outcome: reaching one stamps finished_at (started_at belongs to the attempt).
RUN_OUTCOMES = frozenset({R.PASSED, R.FAILED, R.ERROR, R.REFUSED})


def node_transition(*, node: Node, to: str, actor: str, reason: str = "", now: dt.datetime | None = None) -> bool:
    """Move the node to `to` and record it; False (nothing written) when it is there already.
    The caller holds the node's row lock. The reason is shown on the node while it is out of sale."""
    with transaction.atomic():
        moved = status_move(
            row=node,
            to=to,
            table=NODE_TRANSITIONS,
            event_model=NodeEvent,
            link="node",
            actor=actor,
            reason=reason,
            now=now,
            label=f"node {node.name}",
            field="state",
            event_fields=("from_state", "to_state"),
            also={"state_reason": reason[:300] if to in UNSELLABLE_STATES else ""},
        )
        if moved and to == NodeState.FAILED:  # out of sale until an operator looks: they are told, once per failure
            staff_notify(
                roles=("operator",),
                subject=f"Node {node.name} failed",
                body=f"Node {node.name} ({node.host}) is out of sale.\nWhy: {reason[:500]}",
                link=reverse("admin:fleet_node_change", args=[node.pk]),
            )
    return moved


def nodes_transition(
    *, node_ids: list[int], to: str, actor: str, reason: str = "", now: dt.datetime | None = None
) -> list[Node]:
    """Move each of these nodes, one event each; the nodes that moved. Runs inside the caller's transaction.
    The preparation already holds these rows (capacity.lock_sellable_nodes, first in the lock order): the lock
    here re-reads the state under it, and keeps a caller that took none safe."""
    nodes = Node.objects.select_for_update().filter(pk__in=node_ids).order_by("pk")
    return [node for node in nodes if node_transition(node=node, to=to, actor=actor, reason=reason, now=now)]


def node_reason_note(*, node: Node, actor: str, reason: str, now: dt.datetime | None = None) -> None:
    """A node out of sale stays where it is with a new reason (a recheck of a failed node that failed again):
    the reason shown on it, and an event row from and to its state. The caller holds the node's row lock."""
    if node.state not in UNSELLABLE_STATES:
        raise TransitionNotAllowed(f"node {node.name} is {node.state}: only a node out of sale carries a reason")
    with transaction.atomic():
        node.state_reason = reason[:300]
        node.save(update_fields=["state_reason"])
        NodeEvent.objects.create(
            node=node,
            created_at=now or timezone.now(),
            from_state=node.state,
            to_state=node.state,
            actor=actor,
            reason=reason,
        )


def node_state_set(*, node_id: int, to: str, actor: str, reason: str = "") -> bool:
    """An operator's move (admin actions): the node alone, under its row lock."""
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node_id)
        return node_transition(node=node, to=to, actor=actor, reason=reason)


def run_transition(
    *, run: PreparationRun, to: str, actor: str, reason: str = "", now: dt.datetime | None = None
) -> bool:
    """Move the run to `to` and record it; False (nothing written) when it is there already.
    The caller holds the run's row lock."""
    now = now or timezone.now()
    return status_move(
        row=run,
        to=to,
        table=RUN_TRANSITIONS,
        event_model=PreparationRunEvent,
        link="run",
        actor=actor,
        reason=reason,
        now=now,
        label=f"preparation run {run.pk}",
        own_transaction=True,
        also={"finished_at": now} if to in RUN_OUTCOMES else {},
    )

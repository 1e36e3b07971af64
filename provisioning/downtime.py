"""A rented node's downtime episode, given back on its rental: from the moment the health probe made the node
`degraded` until it recovered, its rental moved to a spare node, or the rental's end came (orders.credits caps it).
"""

from __future__ import annotations

import datetime as dt

from orders.credits import rental_downtime_credit
from orders.models import RentalCredit
from provisioning.models import AccessGrant, NodeEvent, NodeState


def downtime_episode_start(node_id: int) -> dt.datetime | None:
    """When the node's latest degraded episode began (its move into `degraded`), None if it never was."""
    return _episode_moves(node_id).values_list("created_at", flat=True).first()


def _episode_moves(node_id: int):  # noqa: ANN202 - a queryset of NodeEvent
    """The node's moves into `degraded`, the latest first."""
    moves = NodeEvent.objects.filter(node_id=node_id, to_state=NodeState.DEGRADED).exclude(
        from_state=NodeState.DEGRADED
    )
    return moves.order_by("-created_at", "-pk")


def downtime_episode_close(*, node_id: int, until: dt.datetime, actor: str = "system") -> RentalCredit | None:
    """Credit the node's current degraded episode, up to `until`, to the rental whose access is live on it.
    Idempotent (one credit per episode); None when no rental holds the node or it was never degraded."""
    grant = AccessGrant.objects.handed_over().filter(node_id=node_id).first()
    start = downtime_episode_start(node_id)
    if grant is None or start is None:
        return None
    # An episode already over (the node left `degraded` after it began) ends where it ended: the time after was
    # not downtime. Events in the order they were written (their ids), whatever their times say.
    began = _episode_moves(node_id).values_list("pk", flat=True).first()
    left = NodeEvent.objects.filter(node_id=node_id, from_state=NodeState.DEGRADED, pk__gt=began).exclude(
        to_state=NodeState.DEGRADED
    )
    ended = left.order_by("pk").values_list("created_at", flat=True).first()
    if ended is not None:
        until = min(until, ended)
    return rental_downtime_credit(
        order_id=grant.order_id, node_id=node_id, down_from=max(start, grant.granted_at), down_until=until, actor=actor
    )

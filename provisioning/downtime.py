"""A rented node's downtime episode, given back on its rental: from the moment the health probe made the node
`degraded` until it recovered, its rental moved to a spare node, or the rental's end came (capped by
orders.rental_credits).

A fault the tenant's own program can cause never gives time back without a person (issue 39): when every failing
finding of the episode's probes is of such a kind (TENANT_CAUSABLE), the episode is held (`DowntimeHold`), staff
see it under "Needs attention", and `downtime_hold_decide` gives the time back or declines, once, saying who.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from fleet.models import NodeEvent, NodeState
from orders.models import RentalCredit
from orders.outbox import email_enqueue
from orders.rental_credits import rental_downtime_credit
from provisioning.models import AccessGrant, DowntimeHold, NodeHealth

log = logging.getLogger(__name__)
# Failing checks a tenant's own program can bring about: a hardware slowdown or power brake under its load, an XID
# read from the kernel log (text, not the driver's NVML event), a node too loaded to answer or to run the probe.
TENANT_CAUSABLE = frozenset({"throttle", "xid_kernel_log", "reachable", "probe"})


def downtime_episode_start(node_id: int) -> dt.datetime | None:
    """When the node's latest degraded episode began (its move into `degraded`), None if it never was."""
    return _episode_moves(node_id).values_list("created_at", flat=True).first()


def _episode_moves(node_id: int) -> QuerySet[NodeEvent]:
    """The node's moves into `degraded`, the latest first."""
    moves = NodeEvent.objects.filter(node_id=node_id, to_state=NodeState.DEGRADED).exclude(
        from_state=NodeState.DEGRADED
    )
    return moves.order_by("-created_at", "-pk")


def downtime_episode_close(
    *, node_id: int, until: dt.datetime, actor: str = "system"
) -> RentalCredit | DowntimeHold | None:
    """Credit the node's current degraded episode, up to `until`, to the rental whose access is live on it, or hold
    it for a person when the tenant could have caused it. Idempotent (one credit or hold per episode); None when no
    rental holds the node or it was never degraded."""
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
    down_from = max(start, grant.granted_at)
    causes = episode_failures(node_id=node_id, order_id=grant.order_id, start=start, until=until)
    if causes and {check for check, _ in causes} <= TENANT_CAUSABLE:
        return _hold(node_id=node_id, order_id=grant.order_id, down_from=down_from, down_until=until, causes=causes)
    return rental_downtime_credit(
        order_id=grant.order_id, node_id=node_id, down_from=down_from, down_until=until, actor=actor
    )


def episode_failures(*, node_id: int, order_id: int, start: dt.datetime, until: dt.datetime) -> list[tuple[str, str]]:
    """(check, detail) of each failing finding of the rental's probes of the node during the episode, once each."""
    probes = NodeHealth.objects.filter(
        node_id=node_id, order_id=order_id, healthy=False, checked_at__gte=start, checked_at__lte=until
    )
    seen: dict[str, str] = {}
    for findings in probes.order_by("checked_at").values_list("findings", flat=True):
        for item in findings:
            if item.get("status") == "fail":
                seen.setdefault(str(item.get("check")), str(item.get("detail", "")))
    return list(seen.items())


def _hold(
    *, node_id: int, order_id: int, down_from: dt.datetime, down_until: dt.datetime, causes: list[tuple[str, str]]
) -> DowntimeHold:
    words = "; ".join(f"{check}: {detail}" for check, detail in causes)[:2000]
    fields = {"down_until": down_until, "causes": words}
    try:
        with transaction.atomic():
            hold, _ = DowntimeHold.objects.get_or_create(
                order_id=order_id, node_id=node_id, down_from=down_from, defaults=fields
            )
    except IntegrityError:  # written meanwhile by another probe of the same episode
        hold = DowntimeHold.objects.get(order_id=order_id, node_id=node_id, down_from=down_from)
    log.info("downtime of node %s for order %s held for a person: %s", node_id, order_id, words)
    return hold


class DecisionRefused(Exception):
    """The hold was decided already, or the rental can no longer be given time: nothing changed."""


def downtime_hold_decide(*, hold_id: int, credit: bool, actor: str) -> DowntimeHold:
    """A person decided a held episode: its downtime given back (within the rental's cap, the customer emailed), or
    declined. Once: a second decision is refused."""
    with transaction.atomic():
        hold = DowntimeHold.objects.select_for_update().select_related("order").get(pk=hold_id)
        if hold.decision:
            raise DecisionRefused(f"this downtime was {hold.decision} by {hold.decided_by} already")
        given = None
        if credit:
            given = rental_downtime_credit(
                order_id=hold.order_id,
                node_id=hold.node_id,
                down_from=hold.down_from,
                down_until=hold.down_until,
                actor=actor,
            )
            if given is None:
                raise DecisionRefused(
                    f"order {hold.order.reference} is not running: no time can be given back (decline it, and "
                    "make it good another way)"
                )
            email_enqueue(order_id=hold.order_id, name="time_adjusted", params={"credit_id": given.pk})
        hold.decision = "credited" if credit else "declined"
        hold.decided_by, hold.decided_at, hold.credit = actor, timezone.now(), given
        hold.save(update_fields=["decision", "decided_by", "decided_at", "credit"])
    return hold


def downtime_holds_waiting() -> list[DowntimeHold]:
    """Held episodes no one has decided yet, oldest first (the console and "Needs attention")."""
    return list(DowntimeHold.objects.filter(decision="").select_related("order", "node").order_by("created_at"))

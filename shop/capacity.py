"""How many lots can be sold now, and holding them for an order.

Lock order, everywhere: sellable nodes (by primary key), then orders, then the address cursor.
"""

from __future__ import annotations

import datetime as dt
import math

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from provisioning.models import UNSELLABLE_STATES, Node
from shop.models import Order, Reservation


class SoldOut(Exception):
    def __init__(self, available: int) -> None:
        super().__init__(f"only {available} lot(s) available")
        self.available = available


def live_reservations(now: dt.datetime) -> QuerySet[Reservation]:
    """Holds that still count: not released, and either held indefinitely or not yet expired."""
    return Reservation.objects.live().filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def sellable_nodes() -> QuerySet[Node]:
    return Node.objects.exclude(state__in=UNSELLABLE_STATES)


def free_nodes(now: dt.datetime) -> QuerySet[Node]:
    held = live_reservations(now).filter(node=OuterRef("pk"))
    return sellable_nodes().filter(~Exists(held)).order_by("pk")


def lots_available(now: dt.datetime) -> int:
    return free_nodes(now).count()


def lots_cap(fleet: int) -> int:
    """The most lots one unpaid order may hold, for a sellable fleet of `fleet` nodes (MAX_LOTS_PER_UNPAID_ORDER:
    a count, or a share rounded up; never below one lot)."""
    setting = settings.MAX_LOTS_PER_UNPAID_ORDER
    if setting.endswith("%"):
        return max(1, math.ceil(fleet * float(setting[:-1]) / 100))
    return int(setting)


def lock_sellable_nodes() -> int:
    """Take the row locks that serialise every change of capacity (first in the lock order); returns how
    many nodes are sellable (the fleet)."""
    assert transaction.get_connection().in_atomic_block
    return len(sellable_nodes().order_by("pk").select_for_update().values_list("pk", flat=True))


def reserve_lots(*, order: Order, lots: int, expires_at: dt.datetime | None, now: dt.datetime) -> list[Reservation]:
    """Hold `lots` free nodes for the order. The caller holds the node locks and has released
    expired holds; the partial unique index refuses a double hold even if that were forgotten."""
    nodes = list(free_nodes(now)[:lots])
    if len(nodes) < lots:
        raise SoldOut(available=len(nodes))
    return Reservation.objects.bulk_create(
        [Reservation(order=order, node=node, created_at=now, expires_at=expires_at) for node in nodes]
    )


def release_lots(*, order: Order, now: dt.datetime, reason: str) -> int:
    return Reservation.objects.live().filter(order=order).update(released_at=now, release_reason=reason)


def release_lots_on(*, order: Order, node_id: int, now: dt.datetime, reason: str) -> int:
    """Release the order's hold on one node (a node that failed its preflight)."""
    return (
        Reservation.objects.live().filter(order=order, node_id=node_id).update(released_at=now, release_reason=reason)
    )

"""How many lots can be sold now, and holding them for an order.

Lock order, everywhere: sellable nodes (by primary key), then orders, then the address cursor.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from functools import lru_cache
from typing import TypeAlias

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, Field, OuterRef, Q, QuerySet

from fleet.models import UNSELLABLE_STATES, Node
from orders.models import Order, Reservation


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
    # Counted in the database: the locks are taken row by row in primary-key order as the count reads them,
    # and no row travels back.
    locking, params = sellable_nodes().order_by("pk").select_for_update().values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({locking}) locked", params)  # noqa: S608 - the ORM's own SQL
        row = cursor.fetchone()
    assert row is not None, "a COUNT(*) has its one row"
    count: int = row[0]
    return count


def reserve_lots(*, order: Order, lots: int, expires_at: dt.datetime | None, now: dt.datetime) -> list[Reservation]:
    """Hold `lots` free nodes for the order. The caller holds the node locks and has released
    expired holds; the partial unique index refuses a double hold even if that were forgotten."""
    nodes = list(free_nodes(now)[:lots])
    if len(nodes) < lots:
        raise SoldOut(available=len(nodes))
    return Reservation.objects.bulk_create(
        [Reservation(order=order, node=node, created_at=now, expires_at=expires_at) for node in nodes]
    )


class LapsedHolds(Exception):
    """Holds past their end are not released yet: release them (orders.orders.orders_expire_overdue_locked), then
    hold again."""


def lapsed_holds(now: dt.datetime) -> QuerySet[Reservation]:
    """Holds past their end and not released yet: they still block their node (the partial unique index)."""
    return Reservation.objects.live().filter(expires_at__lte=now)


def reserve_free_lots(*, order: Order, lots: int, expires_at: dt.datetime | None, now: dt.datetime) -> list[int]:
    """reserve_lots in one statement (INSERT ... SELECT): the lowest free nodes are chosen and held at once, all
    `lots` or none; returns the held nodes' ids. The caller holds the node locks; the statement, begun after
    them, sees every hold committed before. It holds nothing while a lapsed hold is left anywhere (LapsedHolds:
    the caller releases them and asks again), so that a node whose hold lapsed is never refused as held and
    placing an order needs no statement of its own to look for them."""
    sql, free_params, lapsed_params = hold_statement(lots)
    at_now = _db_moment(now)
    stand_in = _db_moment(_NOW_STAND_IN)
    params: list[SqlParam] = [
        *[at_now if value == stand_in else value for value in free_params],
        *[order.pk, at_now, _db_moment(expires_at), "", lots],
        *[at_now if value == stand_in else value for value in lapsed_params],
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        held = sorted(row[0] for row in cursor.fetchall())
    if len(held) == lots:
        return held
    if lapsed_holds(now).exists():
        raise LapsedHolds
    raise SoldOut(available=lots_available(now))


# One parameter of a raw statement as the ORM's compiled queries give them (of the types cursor.execute takes).
SqlParam: TypeAlias = bool | int | float | Decimal | str | bytes | dt.date | dt.datetime | None

# Stands for `now` in the kept statement: no other parameter of free_nodes or lapsed_holds is a datetime.
_NOW_STAND_IN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


@lru_cache(maxsize=128)
def hold_statement(lots: int) -> tuple[str, tuple[SqlParam, ...], tuple[SqlParam, ...]]:
    """reserve_free_lots' statement for `lots`, built by the ORM once per process (building free_nodes' query
    takes longer than running it): its SQL, and the parameters of free_nodes and of lapsed_holds with
    _NOW_STAND_IN where `now` goes."""
    free, free_params = free_nodes(_NOW_STAND_IN).values(free_node=F("pk"))[:lots].query.sql_with_params()
    lapsed, lapsed_params = lapsed_holds(_NOW_STAND_IN).values("pk").query.sql_with_params()
    meta, quote = Reservation._meta, connection.ops.quote_name
    columns = ", ".join(
        quote(_column(name)) for name in ("order", "node", "created_at", "expires_at", "released_at", "release_reason")
    )
    sql = (  # names from the model and SQL from the ORM; every value is a parameter
        f"WITH free AS ({free}) INSERT INTO {quote(meta.db_table)} ({columns}) "  # noqa: S608
        f"SELECT %s, free_node, %s, %s, NULL, %s FROM free "
        f"WHERE (SELECT COUNT(*) FROM free) = %s AND NOT EXISTS ({lapsed}) "
        f"RETURNING {quote(_column('node'))}"
    )
    return sql, tuple(free_params), tuple(lapsed_params)


def _column(name: str) -> str:
    """A Reservation field's column: each one named here is a concrete field, with a column."""
    field = Reservation._meta.get_field(name)
    assert isinstance(field, Field) and field.column is not None, name
    return field.column


def _db_moment(moment: dt.datetime | None) -> SqlParam:
    prepared: SqlParam = Reservation._meta.get_field("created_at").get_db_prep_value(moment, connection)
    return prepared


def release_lots(*, order: Order, now: dt.datetime, reason: str) -> int:
    return Reservation.objects.live().filter(order=order).update(released_at=now, release_reason=reason)


def release_lots_on(*, order: Order, node_id: int, now: dt.datetime, reason: str) -> int:
    """Release the order's hold on one node (a node that failed its preflight)."""
    return (
        Reservation.objects.live().filter(order=order, node_id=node_id).update(released_at=now, release_reason=reason)
    )

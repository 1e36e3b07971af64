"""When an extension's money arrived, read from its credits: the order domain judges by it whether the money
buys days (orders.extensions.extension_money_late), and access waits for money that is on its way."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Max

from orders.models import EXTENSION_OPEN_STATUSES, Extension, OrderStatus
from orders.payment_outcome import payment_money_late
from payments.models import Credit, CreditKind


def extension_money_arrived_at(*, extension_id: int) -> dt.datetime | None:
    """When the extension's money arrived: the block time of the last counted transfer in the asset asked for
    (of any counted transfer when none came in it: a reviewer may accept another asset). None: nothing came."""
    credits = Credit.objects.counted().filter(payment__extension_id=extension_id).exclude(kind=CreditKind.GAS)
    own = credits.filter(kind__in=(CreditKind.MATCH, CreditKind.LATE)).aggregate(at=Max("block_timestamp"))["at"]
    arrived: dt.datetime | None = own or credits.aggregate(at=Max("block_timestamp"))["at"]
    return arrived


def orders_held_for_extension_money(*, now: dt.datetime) -> set[int]:
    """Active orders whose end has passed but waits: an extension was paid in full, in the asset asked for, before
    the end, and its money is not final yet (judged by arrival, its days are owed). At most
    EXTENSION_FINALITY_GRACE_MINUTES after the end; money short of the price holds nothing."""
    grace = dt.timedelta(minutes=settings.EXTENSION_FINALITY_GRACE_MINUTES)
    waiting = Extension.objects.filter(
        status__in=EXTENSION_OPEN_STATUSES,
        order__status=OrderStatus.ACTIVE,
        order__ends_at__lte=now,
        order__ends_at__gt=now - grace,
    ).select_related("order", "payment")
    held = set()
    for extension in waiting:
        arrived = Credit.objects.counted().filter(
            payment=extension.payment, kind=CreditKind.MATCH, block_timestamp__lt=extension.order.ends_at
        )
        if sum(int(amount) for amount in arrived.values_list("amount_base_units", flat=True)) >= int(
            extension.payment.amount_base_units
        ):
            held.add(extension.order_id)
    return held


def extension_money_came_late(*, extension_id: int | None, now: dt.datetime) -> bool:
    """The door's payment_money_late, told when the extension's money arrived."""
    arrived_at = money_arrived_at(extension_id=extension_id)
    return payment_money_late(extension_id=extension_id, arrived_at=arrived_at, now=now)


def money_arrived_at(*, extension_id: int | None) -> dt.datetime | None:
    """What payments tell the order's door with an extension's outcome (None for an order's first payment)."""
    return None if extension_id is None else extension_money_arrived_at(extension_id=extension_id)

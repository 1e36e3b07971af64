"""When an extension's money arrived, read from its credits: the order domain judges by it whether the money
buys days (orders.extensions.extension_money_late). Access waiting for money on its way reads the same credits
from the order's side (provisioning.access.orders_held_for_extension_money)."""

from __future__ import annotations

import datetime as dt

from django.db.models import Max

from orders.payment_outcome import payment_money_late
from payments.models import Credit, CreditKind


def extension_money_arrived_at(*, extension_id: int) -> dt.datetime | None:
    """When the extension's money arrived: the block time of the last counted transfer in the asset asked for
    (of any counted transfer when none came in it: a reviewer may accept another asset). None: nothing came."""
    credits = Credit.objects.counted().filter(payment__extension_id=extension_id).exclude(kind=CreditKind.GAS)
    own = credits.filter(kind__in=(CreditKind.MATCH, CreditKind.LATE)).aggregate(at=Max("block_timestamp"))["at"]
    arrived: dt.datetime | None = own or credits.aggregate(at=Max("block_timestamp"))["at"]
    return arrived


def extension_money_came_late(*, extension_id: int | None, now: dt.datetime) -> bool:
    """The door's payment_money_late, told when the extension's money arrived."""
    arrived_at = money_arrived_at(extension_id=extension_id)
    return payment_money_late(extension_id=extension_id, arrived_at=arrived_at, now=now)


def money_arrived_at(*, extension_id: int | None) -> dt.datetime | None:
    """What payments tell the order's door with an extension's outcome (None for an order's first payment)."""
    return None if extension_id is None else extension_money_arrived_at(extension_id=extension_id)

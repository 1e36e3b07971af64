"""Extending an active rental: the customer's request checked against a fresh quote, then in one transaction
(under the order's row lock) the extension opened and its payment request made, with a deposit address of its
own. All or nothing. Above the order domain and payments, as placing an order is (shop.placement).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from core.input_errors import OrderInputError
from orders.extensions import (
    extension_awaiting_payment,
    extension_open,
    extension_refusal,
    extension_waiting_refusal,
)
from orders.models import Extension, Order, order_total_usd
from orders.price_guard import price_as_expected
from payments.checkout import order_first_payment, payment_request_open, quote_prepare
from payments.models import Asset
from payments.quotes import QuoteError
from shop.order_input import resolve_asset, resolve_duration

log = logging.getLogger(__name__)


class ExtensionRefused(Exception):
    """The order cannot be extended now (not active, or its rental has ended); the message says why."""


class ExtensionAwaitingPayment(ExtensionRefused):
    """Another extension of the order still awaits its payment: the message names it, `extension` is it."""

    def __init__(self, extension: Extension) -> None:
        super().__init__(extension_waiting_refusal(extension=extension))
        self.extension = extension


def _refuse_unless_extendable(order: Order, now: dt.datetime) -> None:
    if refusal := extension_refusal(order=order, now=now):
        raise ExtensionRefused(refusal)
    # One at a time: each extension watches an address of its own for days, and each "I have paid" checks it.
    if waiting := extension_awaiting_payment(order=order):
        raise ExtensionAwaitingPayment(waiting)


@dataclass(frozen=True)
class ExtensionRequest:
    duration_days: int
    network: str = ""  # default: the order's first payment's
    asset: str = ""
    expected_total_usd: Decimal | None = None  # the total the customer saw: another price is refused


def extension_asset(*, order: Order, request: ExtensionRequest) -> Asset:
    """The asset asked for, among those offered now; by default the one the order was paid in."""
    first = order_first_payment(order).asset
    network = request.network or first.network.slug
    symbol = request.asset or (first.symbol if network == first.network.slug else "")
    return resolve_asset(network, symbol)


def extension_create(*, order: Order, request: ExtensionRequest, now: dt.datetime | None = None) -> Extension:
    """Open an extension of an active rental with its own payment request. Raises ExtensionRefused when the order
    cannot be extended (ExtensionAwaitingPayment while another extension awaits its money), OrderInputError on a
    bad duration or asset (nothing is stored then)."""
    now = now or timezone.now()
    _refuse_unless_extendable(order, now)  # before any quote: no RPC for a refused request
    duration = resolve_duration(request.duration_days)
    asset = extension_asset(order=order, request=request)
    total = order_total_usd(lots=order.lots, price_per_lot_usd=duration.price_per_lot_usd)
    price_as_expected(expected_usd=request.expected_total_usd, total_usd=total)
    try:
        quote = quote_prepare(asset=asset, amount_usd=total)  # network I/O, before any lock is taken
    except QuoteError as exc:
        raise OrderInputError("asset", str(exc)) from None
    with transaction.atomic():
        locked = Order.objects.select_for_update().get(pk=order.pk)
        # Again under the lock: the rental may have ended, or a concurrent request opened one, meanwhile.
        _refuse_unless_extendable(locked, now)
        extension = extension_open(
            order=locked,
            duration_days=duration.days,
            price_per_lot_usd=duration.price_per_lot_usd,
            total_usd=total,
            now=now,
        )
        payment_request_open(order=locked, quote=quote, now=now, extension=extension)
    log.info("order %s: extension %s opened, %s days, %s USD", order.reference, extension.pk, duration.days, total)
    return extension

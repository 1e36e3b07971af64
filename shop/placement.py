"""Placing an order: the customer's request checked against a fresh quote, then in one transaction its lots
held, the order opened, its payment request made and its email stored. All or nothing.

Above both the order domain and payments: it is the one place where the two meet at the start.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from decimal import Decimal
from functools import partial

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.input_errors import OrderInputError
from orders import capacity
from orders.capacity_shown import lots_available_taken
from orders.lot_messages import only_available_message, over_cap_message
from orders.models import Duration, Order, Preparation, order_total_usd
from orders.order_links import order_access_token
from orders.orders import order_open, orders_expire_overdue_locked
from orders.outbox import email_enqueue
from orders.price_guard import price_as_expected
from payments.checkout import PreparedQuote, payment_deadline, payment_request_open, quote_prepare
from payments.models import Asset
from payments.quotes import QuoteError
from shop.catalog import catalog_data

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OrderRequest:
    """What a customer asks for, already parsed by a form or serializer."""

    lots: int
    duration: Duration
    preparation: Preparation
    first_name: str
    last_name: str
    email: str
    ssh_public_key: str
    ssh_key_fingerprint: str
    asset: Asset
    language: str
    hypothesis_kind: str = ""
    hypothesis_text: str = ""
    expected_total_usd: Decimal | None = None  # the total the customer saw: another price is refused


@dataclass(frozen=True)
class PlacedOrder:
    order: Order
    access_token: str


def order_quote(*, request: OrderRequest) -> PreparedQuote:
    total = order_total_usd(lots=request.lots, price_per_lot_usd=request.duration.price_per_lot_usd)
    price_as_expected(expected_usd=request.expected_total_usd, total_usd=total)
    try:
        return quote_prepare(asset=request.asset, amount_usd=total)
    except QuoteError as exc:
        raise OrderInputError("asset", str(exc)) from None


def order_create(*, request: OrderRequest, now: dt.datetime | None = None) -> PlacedOrder:
    """Place an order: hold its lots, open its payment request, record the event, send the email.

    All or nothing: a sold-out or failing step leaves no order, reservation or address behind.
    """
    quote = order_quote(request=request)  # network I/O, before any lock is taken
    now = now or timezone.now()
    for _attempt in range(3):  # a clash of random references is astronomically rare; retry it anyway
        try:
            with transaction.atomic():
                order = _order_create_locked(request=request, quote=quote, now=now)
        except IntegrityError as exc:
            if "reference" in str(exc) or "access_nonce" in str(exc):
                continue
            raise
        break
    else:  # pragma: no cover - three reference clashes in a row
        raise RuntimeError("could not allocate an order reference")

    # Not on commit: the count shown may run ahead of an outer transaction that rolls back; it is display only.
    lots_available_taken(order.lots)
    log.info("order %s placed: %s lots, %s USD", order.reference, order.lots, order.total_usd)
    return PlacedOrder(order=order, access_token=order_access_token(order))


def _order_create_locked(*, request: OrderRequest, quote: PreparedQuote, now: dt.datetime) -> Order:
    fleet = capacity.lock_sellable_nodes()
    if request.lots > (cap := capacity.lots_cap(fleet)):  # nobody holds the fleet without paying
        available = capacity.lots_available(now)
        message = only_available_message(available) if request.lots > available else over_cap_message(cap)
        raise OrderInputError("lots", message)
    lot = catalog_data().lot
    order = order_open(
        now=now,
        lots=request.lots,
        duration=request.duration,
        preparation=request.preparation,
        duration_days=request.duration.days,
        gpu_model=lot.gpu_model,
        gpus_per_lot=lot.gpus_per_lot,
        gpu_memory_gb=lot.gpu_memory_gb,
        price_per_lot_usd=request.duration.price_per_lot_usd,
        total_usd=quote.amount_usd,
        first_name=request.first_name,
        last_name=request.last_name,
        email=request.email,
        ssh_public_key=request.ssh_public_key,
        ssh_key_fingerprint=request.ssh_key_fingerprint,
        hypothesis_kind=request.hypothesis_kind,
        hypothesis_text=request.hypothesis_text,
        language=request.language,
        terms_accepted_at=now,
    )
    try:  # a refusal rolls the order back with the transaction
        _hold_lots(order=order, lots=request.lots, now=now)
    except capacity.SoldOut as exc:
        raise OrderInputError("lots", only_available_message(exc.available)) from None
    order.payment = payment_request_open(order=order, quote=quote, now=now)  # kept: its page is shown at once
    email_enqueue(order_id=order.pk, name="order_received")
    return order


def _hold_lots(*, order: Order, lots: int, now: dt.datetime) -> None:
    """The order's lots, chosen and held in one statement. Holds that lapsed (an unpaid order past its window that
    no expiry pass has reached yet) make it hold nothing: they are released, their orders expired, and it runs
    again, so that a node whose hold lapsed is taken and not refused. The caller holds the node locks."""
    hold = partial(capacity.reserve_free_lots, order=order, lots=lots, expires_at=payment_deadline(now), now=now)
    try:
        hold()
    except capacity.LapsedHolds:
        orders_expire_overdue_locked(now=now)
        hold()

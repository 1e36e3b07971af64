"""The order life cycle: placing an order, the status table, and the one transition function."""

from __future__ import annotations

import datetime as dt
import hmac
import logging
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, OuterRef, Subquery
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext as _

from payments.checkout import PreparedQuote, payment_deadline, payment_request_open, quote_prepare
from payments.models import Asset, Notice
from payments.quotes import QuoteError
from shop import capacity
from shop.catalog import catalog_data, lots_available_forget, lots_available_taken
from shop.models import Duration, Order, OrderEvent, OrderStatus, Preparation, Reservation, order_total_usd

log = logging.getLogger(__name__)
S = OrderStatus

# Allowed next statuses. Every change of status goes through order_transition, which checks this.
ORDER_TRANSITIONS: dict[str, frozenset[str]] = {
    S.AWAITING_PAYMENT: frozenset({S.PAYMENT_REPORTED, S.PAID, S.NEEDS_REVIEW, S.EXPIRED, S.CANCELLED}),
    S.PAYMENT_REPORTED: frozenset({S.AWAITING_PAYMENT, S.PAID, S.NEEDS_REVIEW, S.EXPIRED, S.CANCELLED}),
    # A reorg can take a confirmed payment away again.
    S.PAID: frozenset({S.AWAITING_PAYMENT, S.NEEDS_REVIEW, S.PREPARING, S.CANCELLED}),
    S.NEEDS_REVIEW: frozenset({S.AWAITING_PAYMENT, S.PAID, S.CANCELLED}),
    # A payment that arrives after the window goes to a reviewer, never silently dropped.
    S.EXPIRED: frozenset({S.NEEDS_REVIEW, S.CANCELLED}),
    S.CANCELLED: frozenset(),
    S.PREPARING: frozenset({S.ACTIVE, S.PREPARATION_FAILED}),
    S.PREPARATION_FAILED: frozenset({S.PREPARING, S.CANCELLED}),
    S.ACTIVE: frozenset({S.ENDED}),
    S.ENDED: frozenset(),
}

# Orders whose lots are held only until their payment window ends.
UNPAID_STATUSES = (S.AWAITING_PAYMENT, S.PAYMENT_REPORTED)

TOKEN_SALT = "shop.order.access"  # noqa: S105 - an HMAC domain separator, not a secret
REFERENCE_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"  # no 0/O, 1/I: read aloud and typed safely


class TransitionNotAllowed(Exception):
    pass


class OrderInputError(Exception):
    """A problem with one field of the order, with a message for the customer."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def order_transition(*, order: Order, to: str, actor: str, reason: str = "", now: dt.datetime | None = None) -> None:
    """Validate, save with update_fields, and record who/when/from/to/why. Caller holds the row lock."""
    if to not in ORDER_TRANSITIONS[order.status]:
        raise TransitionNotAllowed(f"order {order.reference}: {order.status} -> {to} is not allowed")
    now = now or timezone.now()
    from_status = order.status
    order.status = to
    order.updated_at = now
    order.save(update_fields=["status", "updated_at"])
    OrderEvent.objects.create(
        order=order, created_at=now, from_status=from_status, to_status=to, actor=actor, reason=reason
    )


def order_note(*, order: Order, actor: str, reason: str, now: dt.datetime) -> None:
    """An event row beside the status history that is not a change of status (a hold extended, data erased)."""
    OrderEvent.objects.create(
        order=order, created_at=now, from_status=order.status, to_status=order.status, actor=actor, reason=reason
    )


def order_access_token(order: Order, secret: str | None = None) -> str:
    """The order's secret link token, under SECRET_KEY unless another `secret` is given."""
    value = f"{order.reference}:{order.access_nonce}"
    return salted_hmac(TOKEN_SALT, value, secret=secret, algorithm="sha256").hexdigest()


def _token_opens(order: Order, token: str) -> bool:
    """Under the current key or one of SECRET_KEY_FALLBACKS: links emailed before a key rotation keep working.
    Every key is compared (in constant time), so the answer's timing says nothing about which one matched."""
    keys = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    matches = [hmac.compare_digest(order_access_token(order, key).encode(), token.encode()) for key in keys]
    return any(matches)


def order_for_token(*, reference: str, token: str | None) -> Order | None:
    """The order if the token opens it; None for a wrong reference or token alike (no oracle)."""
    # The payment, its asset and network, the preparation and the count of "I have paid" notices come in the
    # same query: every caller shows them.
    notices = Notice.objects.filter(payment__order=OuterRef("pk")).order_by().values("payment")
    order = (
        Order.objects.select_related("preparation", "payment__asset__network")
        .annotate(payment_notices=Subquery(notices.annotate(n=Count("pk")).values("n")))
        .filter(reference=str(reference).upper())
        .first()
    )
    if order is None or not token:
        return None
    if not _token_opens(order, str(token)):
        return None
    return order


def order_status_path(order: Order) -> str:
    return reverse("shop:order_status", kwargs={"reference": order.reference, "token": order_access_token(order)})


def new_reference() -> str:
    chars = "".join(secrets.choice(REFERENCE_ALPHABET) for _ in range(8))
    return f"B2-{chars[:4]}-{chars[4:]}"


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


@dataclass(frozen=True)
class PlacedOrder:
    order: Order
    access_token: str


def order_quote(*, request: OrderRequest) -> PreparedQuote:
    total = order_total_usd(lots=request.lots, price_per_lot_usd=request.duration.price_per_lot_usd)
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
    order.payment_notices = 0  # a new order has no "I have paid" notice: its representation need not count them
    log.info("order %s placed: %s lots, %s USD", order.reference, order.lots, order.total_usd)
    return PlacedOrder(order=order, access_token=order_access_token(order))


def _order_create_locked(*, request: OrderRequest, quote: PreparedQuote, now: dt.datetime) -> Order:
    fleet = capacity.lock_sellable_nodes()
    from shop.order_input import only_available_message, over_cap_message  # order_input imports this module

    orders_expire_overdue_locked(now=now)
    if request.lots > (cap := capacity.lots_cap(fleet)):  # nobody holds the fleet without paying
        available = capacity.lots_available(now)
        message = only_available_message(available) if request.lots > available else over_cap_message(cap)
        raise OrderInputError("lots", message)
    lot = catalog_data().lot
    order = Order.objects.create(
        reference=new_reference(),
        access_nonce=secrets.token_hex(16),
        status=S.AWAITING_PAYMENT,
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
        created_at=now,
    )
    OrderEvent.objects.create(
        order=order, created_at=now, to_status=S.AWAITING_PAYMENT, actor="customer", reason="order placed"
    )
    try:
        capacity.reserve_lots(order=order, lots=request.lots, expires_at=payment_deadline(now), now=now)
    except capacity.SoldOut as exc:
        raise OrderInputError("lots", only_available_message(exc.available)) from None
    payment_request_open(order=order, quote=quote, now=now)
    from shop.outbox import email_enqueue  # the outbox imports this module

    email_enqueue(order_id=order.pk, name="order_received")
    return order


def orders_expire_overdue_locked(*, now: dt.datetime) -> int:
    """Expire unpaid orders whose window ended and release their lots. Caller holds the node locks."""
    expired_holds = Reservation.objects.live().filter(expires_at__lte=now)
    # A subquery, not a join: PostgreSQL refuses FOR UPDATE with DISTINCT.
    overdue = (
        Order.objects.select_for_update()
        .filter(status__in=UNPAID_STATUSES, pk__in=expired_holds.values("order_id"))
        .order_by("pk")
    )
    count = 0
    for order in overdue:
        order_transition(order=order, to=S.EXPIRED, actor="system", reason="payment window ended", now=now)
        count += 1
    # Every hold past its deadline is released, so that a node that counts as free can be reserved.
    if expired_holds.update(released_at=now, release_reason="payment window ended"):
        lots_available_forget()
    return count


def orders_expire_overdue(*, now: dt.datetime | None = None) -> int:
    """One pass of the beat task: expire overdue unpaid orders, in the lock order."""
    now = now or timezone.now()
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        return orders_expire_overdue_locked(now=now)


HOLD_EXTENSIBLE = (S.AWAITING_PAYMENT, S.PAYMENT_REPORTED, S.NEEDS_REVIEW)


def order_hold_extend(*, order_id: int, until: dt.datetime, reason: str, actor: str) -> Order:
    """A reviewer keeps an unpaid order's lots past its payment window, to a new end and for a reason (say,
    a transfer stuck at an exchange). Holds that lapsed meanwhile are taken again where nodes are free."""
    if not reason.strip():
        raise OrderInputError("reason", _("Say why the hold is extended."))
    now = timezone.now()
    if until <= now:
        raise OrderInputError("until", _("The new end of the hold must be in the future."))
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        order = Order.objects.select_for_update().get(pk=order_id)
        if order.status not in HOLD_EXTENSIBLE:
            raise OrderInputError("until", _("Only an unpaid order, or one in review, holds its lots until a date."))
        # Its own holds first, so that releasing what lapsed elsewhere does not expire this order.
        order.reservations.live().update(expires_at=until)
        orders_expire_overdue_locked(now=now)
        missing = order.lots - order.reservations.live().count()
        if missing > 0:
            try:
                capacity.reserve_lots(order=order, lots=missing, expires_at=until, now=now)
            except capacity.SoldOut as exc:
                from shop.order_input import only_available_message  # order_input imports this module

                raise OrderInputError("until", only_available_message(exc.available)) from None
        order_note(order=order, actor=actor, reason=f"lots held until {until:%Y-%m-%d %H:%M} UTC: {reason}", now=now)
    lots_available_forget()
    return order


def order_cancel(*, order_id: int, actor: str, reason: str) -> Order:
    if not reason.strip():
        raise OrderInputError("reason", _("Say why the order is cancelled."))
    now = timezone.now()
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        order = Order.objects.select_for_update().get(pk=order_id)
        order_transition(order=order, to=S.CANCELLED, actor=actor, reason=reason, now=now)
        capacity.release_lots(order=order, now=now, reason=f"cancelled: {reason}")
    lots_available_forget()
    return order

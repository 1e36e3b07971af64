"""The order life cycle: placing an order, the status table, and the one transition function."""

from __future__ import annotations

import datetime as dt
import hmac
import logging
import secrets

from django.conf import settings
from django.db import transaction
from django.db.models import FilteredRelation, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from core.input_errors import OrderInputError
from core.transition_event import TransitionNotAllowed, status_move
from orders import capacity
from orders.capacity_shown import lots_available_forget
from orders.lot_messages import only_available_message
from orders.models import FIRST_PAYMENT_JOINED, Order, OrderEvent, OrderStatus
from orders.order_links import order_access_token
from orders.outbox import email_enqueue
from orders.staff_notices import order_staff_notify

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

REFERENCE_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"  # no 0/O, 1/I: read aloud and typed safely


def order_transition(*, order: Order, to: str, actor: str, reason: str = "", now: dt.datetime | None = None) -> bool:
    """Validate against the table, save the status (and `updated_at`), record who/when/from/to/why; True if it
    moved, False (nothing written) when the order is there already. The caller holds the row lock."""
    now = now or timezone.now()
    moved = status_move(
        row=order,
        to=to,
        table=ORDER_TRANSITIONS,
        event_model=OrderEvent,
        link="order",
        actor=actor,
        reason=reason,
        now=now,
        label=f"order {order.reference}",
        also={"updated_at": now},
    )
    if moved:
        order_staff_notify(order=order, to=to, reason=reason)  # paid, in review, failed: staff are told, once
    return moved


def order_note(*, order: Order, actor: str, reason: str, now: dt.datetime) -> None:
    """An event row beside the status history that is not a change of status (a hold extended, data erased)."""
    OrderEvent.objects.create(
        order=order, created_at=now, from_status=order.status, to_status=order.status, actor=actor, reason=reason
    )


def order_open(*, now: dt.datetime, **fields: object) -> Order:
    """A new order in its first state (awaiting payment) with its first event row; the caller holds the node
    locks and reserves its lots in the same transaction (shop.placement)."""
    order = Order.objects.create(
        reference=new_reference(),
        access_nonce=secrets.token_hex(16),
        status=S.AWAITING_PAYMENT,
        created_at=now,
        **fields,
    )
    OrderEvent.objects.create(
        order=order, created_at=now, to_status=S.AWAITING_PAYMENT, actor="customer", reason="order placed"
    )
    return order


def order_token_opens(order: Order, token: str) -> bool:
    """Under the current key or one of SECRET_KEY_FALLBACKS: links emailed before a key rotation keep working.
    Every key is compared (in constant time), so the answer's timing says nothing about which one matched."""
    keys = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    matches = [hmac.compare_digest(order_access_token(order, key).encode(), token.encode()) for key in keys]
    return any(matches)


def order_for_token(*, reference: str, token: str | None) -> Order | None:
    """The order if the token opens it; None for a wrong reference or token alike (no oracle)."""
    # The payment, its asset and network and the preparation come in the same query: every caller uses them.
    order = (
        Order.objects.annotate(
            **{FIRST_PAYMENT_JOINED: FilteredRelation("payments", condition=Q(payments__extension__isnull=True))}
        )
        .select_related("preparation", f"{FIRST_PAYMENT_JOINED}__asset__network")
        .filter(reference=str(reference).upper())
        .first()
    )
    if order is None or not token:
        return None
    if not order_token_opens(order, str(token)):
        return None
    return order


def new_reference() -> str:
    chars = "".join(secrets.choice(REFERENCE_ALPHABET) for _ in range(8))
    return f"B2-{chars[:4]}-{chars[4:]}"


def orders_expire_overdue_locked(*, now: dt.datetime) -> int:
    """Expire unpaid orders whose window ended and release their lots. Caller holds the node locks."""
    expired_holds = capacity.lapsed_holds(now)
    # Nothing lapsed, the usual case: one read instead of an order lock and an update. It is its own statement,
    # after the node locks, so its snapshot has every hold that whoever held those locks before committed (a payment
    # outcome may have moved a hold's end into the past). The holds' ends are compared with the same `now` as below.
    if not expired_holds.exists():
        return 0
    # A subquery, not a join: PostgreSQL refuses FOR UPDATE with DISTINCT.
    overdue = (
        Order.objects.select_for_update()
        .filter(status__in=UNPAID_STATUSES, pk__in=expired_holds.values("order_id"))
        .order_by("pk")
    )
    count = 0
    for order in overdue:
        order_transition(order=order, to=S.EXPIRED, actor="system", reason="payment window ended", now=now)
        email_enqueue(order_id=order.pk, name="order_expired")  # with the move: once, however often this runs
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
        if not order_transition(order=order, to=S.CANCELLED, actor=actor, reason=reason, now=now):
            raise TransitionNotAllowed(f"order {order.reference} is cancelled already")
        capacity.release_lots(order=order, now=now, reason=f"cancelled: {reason}")
    lots_available_forget()
    return order

"""Extensions of an active rental: their status table, their one writer, and what applying one does.

An extension buys more days for an order that is `active`, with a payment request of its own (opened by
`shop.extension_placement`, above both the order domain and payments). Its payment's outcome reaches it
through the one door, `orders.payment_outcome.order_payment_outcome(extension_id=...)`, which applies
EXTENSION_PAYMENT_OUTCOMES here. Once paid while the rental still runs it is `applied`: the rental's end moves
by its days in the same transaction, and the node's key backstop, the reminders and a new signed manifest
follow through the job outbox. Paid after the rental ended, it goes to a reviewer and its money is due back.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction
from django.db.models import F
from django.dispatch import Signal
from django.utils import timezone
from django.utils.translation import gettext as _

from core.amounts import format_units
from core.transition_event import status_move
from orders.models import EXTENSION_OPEN_STATUSES, Extension, ExtensionEvent, ExtensionStatus, Order, OrderStatus
from orders.orders import order_note
from orders.outbox import email_enqueue

log = logging.getLogger(__name__)
E = ExtensionStatus
# Sent inside the transaction that applies an extension (with `extension`, `order` and the new `ends_at`):
# provisioning moves the order's grants and their nodes' backstop to the new end (provisioning/access.py).
extension_applied = Signal()

# Allowed next statuses. An extension waits for its money (reported or not), goes to a reviewer on an
# exception, expires with its payment window (or a reviewer's rejection), and is applied once paid. Applied is
# final: the days were given (a reorg after that is noted on the order for staff).
EXTENSION_TRANSITIONS: dict[str, frozenset[str]] = {
    E.AWAITING_PAYMENT: frozenset({E.PAYMENT_REPORTED, E.NEEDS_REVIEW, E.APPLIED, E.EXPIRED}),
    E.PAYMENT_REPORTED: frozenset({E.AWAITING_PAYMENT, E.NEEDS_REVIEW, E.APPLIED, E.EXPIRED}),
    E.NEEDS_REVIEW: frozenset({E.AWAITING_PAYMENT, E.APPLIED, E.EXPIRED}),
    # Money seen after the window: a reviewer looks (or it was paid in time and seen late: applied).
    E.EXPIRED: frozenset({E.NEEDS_REVIEW, E.APPLIED}),
    E.APPLIED: frozenset(),
}
# Extensions whose payment window still runs.
OPEN_STATUSES = EXTENSION_OPEN_STATUSES


def extension_transition(
    *, extension: Extension, to: str, actor: str, reason: str, now: dt.datetime | None = None
) -> bool:
    """Validate against the table, save the status alone, record who/when/from/to/why; True if it moved.
    A non-change is a no-op. The caller holds the order's row lock (extensions move under their order)."""
    return status_move(
        row=extension,
        to=to,
        table=EXTENSION_TRANSITIONS,
        event_model=ExtensionEvent,
        link="extension",
        actor=actor,
        reason=reason,
        now=now,
    )


def extension_refusal(*, order: Order, now: dt.datetime) -> str:
    """Why this order cannot be extended now ("" when it can): only a rental that runs."""
    if order.status != OrderStatus.ACTIVE or order.ends_at is None:
        return _("Only an active rental can be extended; this order is “%(status)s”.") % {
            "status": order.get_status_display()
        }
    if order.ends_at <= now:
        return _("This rental has ended: it can no longer be extended.")
    return ""


def extension_awaiting_payment(*, order: Order) -> Extension | None:
    """The order's extension whose money is still awaited (`awaiting_payment` or `payment_reported`): at most
    one per order, as extension_create refuses a second under the order's row lock."""
    return (
        Extension.objects.filter(order=order, status__in=OPEN_STATUSES)
        .select_related("payment__asset__network")
        .order_by("pk")
        .first()
    )


def extension_waiting_refusal(*, extension: Extension) -> str:
    """Why another extension is refused while this one awaits its money: it names the one to pay."""
    payment = extension.payment
    return _(
        "Extension %(id)s still awaits its payment of %(amount)s %(asset)s to %(address)s (shown on the order "
        "page): pay it, or let its payment window end, before asking for another."
    ) % {
        "id": extension.pk,
        "amount": format_units(payment.amount_base_units, payment.decimals),
        "asset": payment.asset.symbol,
        "address": payment.address,
    }


def extension_open(
    *, order: Order, duration_days: int, price_per_lot_usd: Decimal, total_usd: Decimal, now: dt.datetime
) -> Extension:
    """A new extension in its first state, with its first event row. The caller holds the order's row lock,
    has checked `extension_refusal` and that none awaits its payment (`extension_awaiting_payment`), and opens
    its payment request in the same transaction."""
    extension = Extension.objects.create(
        order=order,
        status=E.AWAITING_PAYMENT,
        duration_days=duration_days,
        price_per_lot_usd=price_per_lot_usd,
        lots=order.lots,
        total_usd=total_usd,
        created_at=now,
    )
    ExtensionEvent.objects.create(
        extension=extension,
        created_at=now,
        from_status="",
        to_status=E.AWAITING_PAYMENT,
        actor="customer",
        reason=f"{duration_days} more days asked for",
    )
    return extension


def extension_money_late(*, extension_id: int, arrived_at: dt.datetime | None, now: dt.datetime) -> bool:
    """Money for this extension cannot be used: it is not applied, and it arrived after the rental's end (with
    none arrived yet: the end has passed), or the rental no longer runs (its access was taken back).
    Judged by when the money arrived (`arrived_at`, from payments: payments/extension_money.py), never by when
    it is looked at: a reviewer may come after the end."""
    extension = Extension.objects.select_related("order").get(pk=extension_id)
    if extension.status == E.APPLIED:
        return False
    order = extension.order
    if order.status != OrderStatus.ACTIVE or order.ends_at is None:
        return True
    return (arrived_at or now) >= order.ends_at


def extension_apply(*, extension: Extension, order: Order, actor: str, reason: str, now: dt.datetime) -> None:
    """Paid while the rental runs: its end moves by the extension's days, here and (through `extension_applied`,
    which provisioning receives) on the order's grants and nodes, in the caller's transaction (the order's row
    lock held); the customer is emailed."""
    before = order.ends_at
    assert before is not None, "an active rental has its end"  # the caller's (extension_refusal) check
    after = before + dt.timedelta(days=extension.duration_days)
    extension_transition(extension=extension, to=E.APPLIED, actor=actor, reason=reason, now=now)
    extension.applied_at, extension.ends_at_before, extension.ends_at_after = now, before, after
    extension.save(update_fields=["applied_at", "ends_at_before", "ends_at_after"])
    order.ends_at = after
    order.save(update_fields=["ends_at"])
    order_note(order=order, actor=actor, reason=f"rental extended by {extension.duration_days} days", now=now)
    extension_applied.send(sender=Extension, extension=extension, order=order, ends_at=after)
    email_enqueue(order_id=order.pk, name="extension_applied", params={"extension_id": extension.pk})
    log.info("order %s: extended by %s days to %s", order.reference, extension.duration_days, after)


class ExtensionOutcome:
    """What payments tell an extension (the same outcomes as an order's: orders.payment_outcome)."""

    PAID = "paid"
    NEEDS_REVIEW = "needs_review"
    HOLD = "hold"
    UNPAID = "unpaid"
    REJECTED = "rejected"
    REPORTED = "reported"


@dataclass(frozen=True)
class ExtensionRule:
    target: str | None  # None: nothing moves (the full amount is seen, not final yet)
    moves_from: frozenset[str]
    stays_in: frozenset[str] = frozenset()


_X = ExtensionOutcome
# Each payment outcome: the extension status it leads to, and from where. Every move is in EXTENSION_TRANSITIONS.
# PAID becomes NEEDS_REVIEW instead when its money came after the rental ended (extension_payment_outcome).
EXTENSION_PAYMENT_OUTCOMES: dict[str, ExtensionRule] = {
    _X.PAID: ExtensionRule(
        target=E.APPLIED,
        moves_from=frozenset({E.AWAITING_PAYMENT, E.PAYMENT_REPORTED, E.NEEDS_REVIEW, E.EXPIRED}),
        stays_in=frozenset({E.APPLIED}),
    ),
    _X.NEEDS_REVIEW: ExtensionRule(
        target=E.NEEDS_REVIEW,
        moves_from=frozenset({E.AWAITING_PAYMENT, E.PAYMENT_REPORTED, E.EXPIRED}),
        stays_in=frozenset({E.NEEDS_REVIEW}),
    ),
    _X.HOLD: ExtensionRule(target=None, moves_from=frozenset()),
    _X.UNPAID: ExtensionRule(
        target=E.AWAITING_PAYMENT,
        moves_from=frozenset({E.NEEDS_REVIEW}),
        stays_in=frozenset({E.AWAITING_PAYMENT, E.PAYMENT_REPORTED, E.EXPIRED}),
    ),
    _X.REPORTED: ExtensionRule(
        target=E.PAYMENT_REPORTED,
        moves_from=frozenset({E.AWAITING_PAYMENT}),
        stays_in=frozenset(E.values) - {E.AWAITING_PAYMENT},  # once is enough; later presses change nothing
    ),
    _X.REJECTED: ExtensionRule(
        target=E.EXPIRED,
        moves_from=frozenset({E.AWAITING_PAYMENT, E.PAYMENT_REPORTED, E.NEEDS_REVIEW}),
        stays_in=frozenset({E.EXPIRED}),
    ),
}


def extension_payment_outcome(
    *, extension_id: int, outcome: str, reason: str, actor: str, now: dt.datetime, money_arrived_at: dt.datetime | None
) -> Extension:
    """Apply EXTENSION_PAYMENT_OUTCOMES. Runs inside the payment's transaction (lock order: payment, order).
    `money_arrived_at`: when the extension's money arrived (payments/extension_money.py), None if none did."""
    extension = Extension.objects.get(pk=extension_id)
    order = Order.objects.select_for_update().get(pk=extension.order_id)
    extension.refresh_from_db()  # under the order's lock
    rule = EXTENSION_PAYMENT_OUTCOMES[outcome]
    if rule.target is None or extension.status in rule.stays_in - rule.moves_from:
        return extension
    if extension.status not in rule.moves_from:
        # e.g. a reorg took the money of an applied extension: staff see it on the order, nothing moves.
        order_note(order=order, actor=actor, reason=f"extension {extension.pk}: {outcome} ignored: {reason}", now=now)
        log.warning("extension %s: payment outcome %s ignored in status %s", extension.pk, outcome, extension.status)
        return extension
    if rule.target == E.APPLIED:
        # Money that arrived before the end buys its days even when it is confirmed (or accepted) after it.
        if extension_money_late(extension_id=extension.pk, arrived_at=money_arrived_at, now=now):
            why = f"{reason}; paid after the rental ended: the money is due back"
            extension_transition(extension=extension, to=E.NEEDS_REVIEW, actor=actor, reason=why, now=now)
            return extension
        extension_apply(extension=extension, order=order, actor=actor, reason=reason, now=now)
        return extension
    extension_transition(extension=extension, to=rule.target, actor=actor, reason=reason, now=now)
    return extension


def extensions_expire_overdue(*, now: dt.datetime | None = None) -> int:
    """Extensions still waiting when their payment window ended expire (money seen in full waits for its
    confirmations: its payment is `detected`). Idempotent; run by beat with the orders' expiry."""
    now = now or timezone.now()
    overdue = (
        Extension.objects.filter(status__in=OPEN_STATUSES, payment__expires_at__lte=now)
        .exclude(payment__status="detected", payment__received_base_units__gte=F("payment__amount_base_units"))
        .values_list("pk", "order_id")
    )
    count = 0
    for extension_id, order_id in overdue:
        with transaction.atomic():
            Order.objects.select_for_update().get(pk=order_id)
            extension = Extension.objects.get(pk=extension_id)
            if extension.status in OPEN_STATUSES:
                extension_transition(
                    extension=extension, to=E.EXPIRED, actor="system", reason="payment window ended", now=now
                )
                count += 1
    return count

"""The one door from payments into the order: what a payment's outcome does to its order, as one table.

Payments call `order_payment_outcome` (inside the payment's transaction, after `order_outcome_locks` when the
outcome may hold lots again) and nothing else of the order's; an import-linter contract keeps it so.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings
from django.utils import timezone

from core.input_errors import OrderInputError
from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from orders import capacity
from orders.capacity_shown import lots_available_forget
from orders.extensions import extension_money_late, extension_payment_outcome
from orders.lot_messages import only_available_message
from orders.models import Order, OrderStatus
from orders.orders import (
    UNPAID_STATUSES,
    order_note,
    order_transition,
    orders_expire_overdue_locked,
)

log = logging.getLogger(__name__)
S = OrderStatus


class OrderPaymentOutcome:
    """What payments tells shop, through order_payment_outcome only."""

    PAID = "paid"  # confirmed in full (or accepted by a reviewer)
    NEEDS_REVIEW = "needs_review"  # an exception a reviewer settles
    HOLD = "hold"  # the full amount of the right asset is seen: keep the lots past the window while it confirms
    UNPAID = "unpaid"  # the money went away again (reorg): back to waiting
    REJECTED = "rejected"  # a reviewer refused the payment
    REPORTED = "reported"  # the customer pressed "I have paid": a claim, never proof


class Holds:
    """What a payment outcome does to the order's live holds on lots."""

    OPEN_ENDED = "open_ended"  # kept without an end: the money is there
    WINDOW = "window"  # kept until the payment window's end, as for an order with nothing seen
    RELEASED = "released"  # the order is cancelled
    # A review keeps them as they were: the window's end (or a reviewer's extension), or no end once the right
    # asset arrived in full. Anything less must not hold the fleet until someone acts.
    AS_THEY_WERE = "as_they_were"


@dataclass(frozen=True)
class OutcomeRule:
    """What one payment outcome does to an order. From any other status it moves nothing: it is logged (or
    noted, when the caller asks) as evidence for staff, e.g. money for an order that is being prepared."""

    target: str | None  # the status the order moves to; None: the status stays, only the holds change
    moves_from: frozenset[str]
    holds: str  # one of Holds
    stays_in: frozenset[str] = frozenset()  # in effect already: no move, the holds are set again
    # Order statuses where another outcome applies instead, and why.
    instead: Mapping[str, tuple[str, str]] = field(default_factory=dict)


_O = OrderPaymentOutcome
# Each payment outcome: the order status it leads to, and from where. Every move is also in ORDER_TRANSITIONS.
ORDER_PAYMENT_OUTCOMES: dict[str, OutcomeRule] = {
    _O.PAID: OutcomeRule(
        target=S.PAID,
        moves_from=frozenset({S.AWAITING_PAYMENT, S.PAYMENT_REPORTED, S.NEEDS_REVIEW}),
        stays_in=frozenset({S.PAID}),
        holds=Holds.OPEN_ENDED,
        # Paid in time, seen after the lots were released: a reviewer confirms there is still room.
        instead={S.EXPIRED: (_O.NEEDS_REVIEW, "the order had expired and its lots were released")},
    ),
    _O.NEEDS_REVIEW: OutcomeRule(
        target=S.NEEDS_REVIEW,
        moves_from=frozenset({S.AWAITING_PAYMENT, S.PAYMENT_REPORTED, S.EXPIRED, S.PAID}),
        stays_in=frozenset({S.NEEDS_REVIEW}),
        holds=Holds.AS_THEY_WERE,
    ),
    _O.HOLD: OutcomeRule(target=None, moves_from=frozenset(), holds=Holds.OPEN_ENDED),
    _O.UNPAID: OutcomeRule(
        target=S.AWAITING_PAYMENT,
        moves_from=frozenset({S.PAID, S.NEEDS_REVIEW}),
        stays_in=frozenset(UNPAID_STATUSES),  # part of the amount seen: the window's end stands
        holds=Holds.WINDOW,
    ),
    _O.REPORTED: OutcomeRule(
        target=S.PAYMENT_REPORTED,
        moves_from=frozenset({S.AWAITING_PAYMENT}),
        stays_in=frozenset(S.values) - {S.AWAITING_PAYMENT},  # once is enough; later presses change nothing
        holds=Holds.AS_THEY_WERE,
    ),
    _O.REJECTED: OutcomeRule(
        target=S.CANCELLED,
        moves_from=frozenset({S.AWAITING_PAYMENT, S.PAYMENT_REPORTED, S.NEEDS_REVIEW, S.EXPIRED}),
        stays_in=frozenset({S.CANCELLED}),
        holds=Holds.RELEASED,
    ),
}


def order_lots_gone(*, order_id: int, now: dt.datetime) -> bool:
    """The order could not be served now: the holds it still has and the free lots together are fewer than it
    bought (its lots were released and sold, or their nodes left the fleet). Money that arrives late for such an
    order goes back without waiting for anyone."""
    order = Order.objects.only("lots").get(pk=order_id)
    held = capacity.live_reservations(now).filter(order_id=order_id).count()
    return held + capacity.lots_available(now) < order.lots


def payment_money_late(*, extension_id: int | None, arrived_at: dt.datetime | None, now: dt.datetime) -> bool:
    """An extension's money that cannot be used (its rental is over, it was not applied): all of it is due
    back, as late money for an order nobody can serve. `arrived_at`: when it arrived (payments knows). Always
    False for an order's first payment."""
    return extension_id is not None and extension_money_late(extension_id=extension_id, arrived_at=arrived_at, now=now)


def order_outcome_locks() -> None:
    """The locks an outcome that may hold lots again needs, taken first (lock order: nodes, payment, order)."""
    capacity.lock_sellable_nodes()


def order_payment_outcome(
    *,
    order_id: int,
    outcome: str,
    reason: str,
    actor: str = "system",
    now: dt.datetime | None = None,
    hold_missing_lots: bool = False,
    note_if_unmoved: bool = False,
    extension_id: int | None = None,
    money_arrived_at: dt.datetime | None = None,
) -> Order:
    """The one door from payments into shop, following ORDER_PAYMENT_OUTCOMES. Runs inside the payment's
    transaction (lock order: payment, then order).
    `note_if_unmoved`: an order whose status cannot move (being prepared, active) still gets an event row.
    `extension_id`: the payment is an extension's (its `extension_id`): the outcome is the extension's
    (orders.extensions.EXTENSION_PAYMENT_OUTCOMES) and the order's status and lots stay as they are;
    `money_arrived_at` says when its money arrived (payments/extension_money.py), None if none did."""
    now = now or timezone.now()
    if extension_id is not None:
        extension_payment_outcome(
            extension_id=extension_id,
            outcome=outcome,
            reason=reason,
            actor=actor,
            now=now,
            money_arrived_at=money_arrived_at,
        )
        return Order.objects.get(pk=order_id)
    order = Order.objects.select_for_update().get(pk=order_id)
    rule = ORDER_PAYMENT_OUTCOMES[outcome]
    if order.status in rule.instead:
        outcome, why = rule.instead[order.status]
        rule, reason = ORDER_PAYMENT_OUTCOMES[outcome], f"{reason}; {why}"
    if rule.target is None:  # the status stays: only the holds change
        _holds_follow(order=order, holds=rule.holds, reason=reason, now=now)
        return order
    if order.status in rule.moves_from:
        moved = order_transition(order=order, to=rule.target, actor=actor, reason=reason, now=now)
        if moved and rule.target == S.PAID and settings.AUTO_PREPARE:
            # Provisioning starts the preparation (AUTO_PREPARE): a job stored with the payment's outcome.
            job_enqueue(JobKind.PREPARATION_AUTO, order_id=order.pk)
    elif order.status not in rule.stays_in:
        _outcome_unmoved(order=order, outcome=outcome, reason=reason, actor=actor, now=now, note=note_if_unmoved)
        return order
    if hold_missing_lots and rule.target == S.PAID:
        _hold_missing_lots(order=order, now=now)
    lots_available_forget()  # holds may be taken again or released below
    _holds_follow(order=order, holds=rule.holds, reason=reason, now=now)
    return order


def _outcome_unmoved(*, order: Order, outcome: str, reason: str, actor: str, now: dt.datetime, note: bool) -> None:
    if note:
        # e.g. a deep reorg under an order whose access is given: staff see it on the order, nothing moves.
        order_note(order=order, actor=actor, reason=reason, now=now)
        log.warning("order %s: payment outcome %s noted in status %s", order.reference, outcome, order.status)
    else:
        log.warning("order %s: payment outcome %s ignored in status %s", order.reference, outcome, order.status)


def _holds_follow(*, order: Order, holds: str, reason: str, now: dt.datetime) -> None:
    live = order.reservations.live()
    if holds == Holds.OPEN_ENDED:
        live.update(expires_at=None)
    elif holds == Holds.WINDOW:
        live.update(expires_at=order.payment.expires_at)
    elif holds == Holds.RELEASED:
        capacity.release_lots(order=order, now=now, reason=reason)


def _hold_missing_lots(*, order: Order, now: dt.datetime) -> None:
    """Hold again the lots of an order whose holds lapsed (money accepted after it expired).
    The caller holds the node locks (first in the lock order)."""
    orders_expire_overdue_locked(now=now)  # lapsed holds are released first, so free nodes can be reserved
    missing = order.lots - order.reservations.live().count()
    if missing <= 0:
        return
    try:
        capacity.reserve_lots(order=order, lots=missing, expires_at=None, now=now)
    except capacity.SoldOut as exc:
        raise OrderInputError("lots", only_available_message(exc.available)) from None


# Orders whose lots a reviewer may keep past the payment window.

"""The payment's status table and its one writer: every change of a payment's status goes through here."""

from __future__ import annotations

import datetime as dt

from core.transition_event import status_move
from payments.models import PaymentEvent, PaymentRequest, PaymentStatus

P = PaymentStatus

# Allowed next statuses. The verifier moves a payment to whatever its credits call for (payments/settle.py:
# any status but rejected, from any but rejected); a reviewer accepts (confirmed) or rejects it.
# Rejected is final: money that arrives later is recorded and refunded, never counted.
PAYMENT_TRANSITIONS: dict[str, frozenset[str]] = {
    P.PENDING: frozenset({P.DETECTED, P.CONFIRMED, P.OVERPAID, P.UNDERPAID, P.LATE, P.WRONG_NETWORK, P.REJECTED}),
    P.DETECTED: frozenset({P.PENDING, P.CONFIRMED, P.OVERPAID, P.UNDERPAID, P.LATE, P.WRONG_NETWORK, P.REJECTED}),
    # A reorg can take confirmed money away again; a reviewer may still reject it.
    P.CONFIRMED: frozenset({P.PENDING, P.DETECTED, P.OVERPAID, P.UNDERPAID, P.LATE, P.WRONG_NETWORK, P.REJECTED}),
    P.OVERPAID: frozenset({P.PENDING, P.DETECTED, P.CONFIRMED, P.UNDERPAID, P.LATE, P.WRONG_NETWORK, P.REJECTED}),
    P.UNDERPAID: frozenset({P.PENDING, P.DETECTED, P.CONFIRMED, P.OVERPAID, P.LATE, P.WRONG_NETWORK, P.REJECTED}),
    P.LATE: frozenset({P.PENDING, P.DETECTED, P.CONFIRMED, P.OVERPAID, P.UNDERPAID, P.WRONG_NETWORK, P.REJECTED}),
    P.WRONG_NETWORK: frozenset({P.PENDING, P.DETECTED, P.CONFIRMED, P.OVERPAID, P.UNDERPAID, P.LATE, P.REJECTED}),
    P.REJECTED: frozenset(),
}

# The part of the table a reviewer may use (payments/review.py): accept (confirmed) what is not confirmed
# or rejected yet, reject what is not rejected yet.
REVIEWER_TRANSITIONS: dict[str, frozenset[str]] = {
    P.PENDING: frozenset({P.CONFIRMED, P.REJECTED}),
    P.DETECTED: frozenset({P.CONFIRMED, P.REJECTED}),
    P.CONFIRMED: frozenset({P.REJECTED}),
    P.OVERPAID: frozenset({P.CONFIRMED, P.REJECTED}),
    P.UNDERPAID: frozenset({P.CONFIRMED, P.REJECTED}),
    P.LATE: frozenset({P.CONFIRMED, P.REJECTED}),
    P.WRONG_NETWORK: frozenset({P.CONFIRMED, P.REJECTED}),
    P.REJECTED: frozenset(),
}


def payment_transition(*, payment: PaymentRequest, to: str, actor: str, reason: str, now: dt.datetime) -> bool:
    """Validate against the table, save the status alone, and record who/when/from/to/why; True if it moved.

    A non-change is a no-op (False, no event row): the verifier recomputes a payment as often as it likes.
    The caller holds the payment's row lock, in the transaction the event row joins."""
    return status_move(
        row=payment,
        to=to,
        table=PAYMENT_TRANSITIONS,
        event_model=PaymentEvent,
        link="payment",
        actor=actor,
        reason=reason,
        now=now,
    )


def payment_note(*, payment: PaymentRequest, actor: str, reason: str, now: dt.datetime) -> None:
    """An event row beside the status history that is not a change of status (a refund decision, a deep reorg
    that leaves the status where it was), written as order_note writes the order's."""
    status = payment.status
    PaymentEvent.objects.create(
        payment=payment, created_at=now, from_status=status, to_status=status, actor=actor, reason=reason
    )

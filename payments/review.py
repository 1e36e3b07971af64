"""Reviewers' decisions on payment exceptions. Each needs a reason and writes an event row."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from payments.models import PaymentRequest, PaymentStatus
from payments.settle import payment_transition
from shop import capacity
from shop.orders import OrderInputError, OrderPaymentOutcome, order_payment_outcome

P = PaymentStatus


class ReviewError(Exception):
    pass


class Decision:
    ACCEPT = "accept"  # the money counts: the order is paid
    REJECT = "reject"  # the money does not count: the order is cancelled, whatever arrived is refunded
    REFUND = "refund"  # flag what must be sent back (an overpayment's excess, or everything)

    choices = [(ACCEPT, "Accept the payment"), (REJECT, "Reject the payment"), (REFUND, "Mark for refund")]


def payment_review_decide(*, payment_id: int, decision: str, reason: str, reviewer: str) -> PaymentRequest:
    if not reason.strip():
        raise ReviewError("A reason is required for every decision.")
    now = timezone.now()
    actor = f"reviewer {reviewer}"
    with transaction.atomic():
        # Lock order: nodes (an accepted order may need its lots held again), payment, order.
        capacity.lock_sellable_nodes()
        payment = PaymentRequest.objects.select_for_update().get(pk=payment_id)
        received = int(payment.received_base_units) + _exception_amount(payment)
        if decision == Decision.ACCEPT:
            if received <= 0:
                raise ReviewError("Nothing arrived at this address: there is nothing to accept.")
            if payment.status in (P.CONFIRMED, P.REJECTED):
                raise ReviewError(f"The payment is already {payment.status}.")
            payment.reviewed_at, payment.reviewed_by = now, reviewer
            payment.save(update_fields=["reviewed_at", "reviewed_by"])
            payment_transition(payment=payment, to=P.CONFIRMED, actor=actor, reason=reason, now=now)
            try:
                order_payment_outcome(
                    order_id=payment.order_id,
                    outcome=OrderPaymentOutcome.PAID,
                    actor=actor,
                    reason=f"payment accepted by a reviewer: {reason}",
                    now=now,
                    hold_missing_lots=True,
                )
            except OrderInputError as exc:
                raise ReviewError(f"{exc.message} The order's lots were released; free a node first.") from None
        elif decision == Decision.REJECT:
            if payment.status == P.REJECTED:
                raise ReviewError("The payment is already rejected.")
            payment.reviewed_at, payment.reviewed_by = now, reviewer
            payment.refund_due_base_units = received
            payment.save(update_fields=["reviewed_at", "reviewed_by", "refund_due_base_units"])
            payment_transition(payment=payment, to=P.REJECTED, actor=actor, reason=reason, now=now)
            order_payment_outcome(
                order_id=payment.order_id,
                outcome=OrderPaymentOutcome.REJECTED,
                actor=actor,
                reason=f"payment rejected by a reviewer: {reason}",
                now=now,
            )
        elif decision == Decision.REFUND:
            excess = received - int(payment.amount_base_units)
            payment.refund_due_base_units = excess if excess > 0 and payment.status != P.REJECTED else received
            payment.refund_decided_at = now
            payment.save(update_fields=["refund_due_base_units", "refund_decided_at"])
            payment_transition(
                payment=payment,
                to=payment.status,
                actor=actor,
                reason=f"marked for refund of {payment.refund_due_base_units} base units: {reason}",
                now=now,
            )
        else:
            raise ReviewError(f"Unknown decision {decision!r}.")
    return payment


def _exception_amount(payment: PaymentRequest) -> int:
    """Money that arrived but is not in `received` (late, wrong network or token): it counts on accept."""
    from payments.models import CreditKind

    return sum(
        int(credit.amount_base_units)
        for credit in payment.credits.filter(removed_at__isnull=True).exclude(kind=CreditKind.MATCH)
    )

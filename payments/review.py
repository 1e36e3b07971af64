"""Reviewers' decisions on payment exceptions. Each needs a reason and writes an event row."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from payments.models import PaymentRequest, PaymentStatus
from payments.refunds_due import ALL, UNNEEDED, refunds_due_compute, refunds_due_text
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
        credits = list(payment.credits.filter(removed_at__isnull=True).select_related("network", "asset"))
        money = {"payment": payment, "credits": credits}
        if decision == Decision.ACCEPT:
            if not credits:
                raise ReviewError("Nothing arrived at this address: there is nothing to accept.")
            if payment.status in (P.CONFIRMED, P.REJECTED):
                raise ReviewError(f"The payment is already {payment.status}.")
            payment.reviewed_at, payment.reviewed_by, payment.settled_at = now, reviewer, now
            if payment.refund_decided_at is None:
                payment.refunds_due = []  # what is on the address now is accepted; later money is due back
            payment.save(update_fields=["reviewed_at", "reviewed_by", "settled_at"])
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
            payment.refunds_due, payment.refund_decided_at = refunds_due_compute(**money, scope=ALL), now
            payment.save(update_fields=["reviewed_at", "reviewed_by", "refunds_due", "refund_decided_at"])
            payment_transition(payment=payment, to=P.REJECTED, actor=actor, reason=reason, now=now)
            order_payment_outcome(
                order_id=payment.order_id,
                outcome=OrderPaymentOutcome.REJECTED,
                actor=actor,
                reason=f"payment rejected by a reviewer: {reason}",
                now=now,
            )
        elif decision == Decision.REFUND:
            # What the order does not need (an excess, stray money), or all of it when it needs none of it.
            due = refunds_due_compute(**money, scope=UNNEEDED)
            if payment.status == P.REJECTED or not due:
                due = refunds_due_compute(**money, scope=ALL)
            payment.refunds_due, payment.refund_decided_at = due, now
            payment.save(update_fields=["refunds_due", "refund_decided_at"])
            payment_transition(
                payment=payment,
                to=payment.status,
                actor=actor,
                reason=f"marked for refund of {refunds_due_text(due)}: {reason}",
                now=now,
            )
        else:
            raise ReviewError(f"Unknown decision {decision!r}.")
    return payment

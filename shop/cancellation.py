"""Cancelling an order in the admin: the order stops, and whatever its customer paid opens refunds, in one
transaction (lock order: nodes, payment, order). Above both the order domain and payments, as placing is."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from orders.orders import order_cancel
from orders.payment_outcome import order_outcome_locks
from payments.models import PaymentRequest
from payments.refunds import refunds_open_all


def order_cancel_with_refunds(*, order_id: int, actor: str, reason: str) -> list[str]:
    """Returns, in words for staff, what is due back but not promised: money that already left a deposit
    address (a sweep to the treasury) cannot be refunded from it (payments.refunds.refund_room)."""
    with transaction.atomic():
        order_outcome_locks()
        # The first payment and every extension's: all that the customer paid goes back.
        payments = list(PaymentRequest.objects.select_for_update().filter(order_id=order_id).order_by("pk"))
        order_cancel(order_id=order_id, actor=actor, reason=reason)
        short = [
            refunds_open_all(payment=payment, actor=actor, reason=f"order cancelled: {reason}", now=timezone.now())
            for payment in payments
        ]
    return [text for text in short if text]

"""The payment emails' template context, for the outbox (orders/outbox.py)."""

from __future__ import annotations

from typing import Any

from django.utils.functional import lazy

from orders.models import Order
from orders.outbox import email_context
from payments.models import PaymentRequest, Refund
from payments.networks import finality_description


@email_context("payment_detected", "payment_confirmed", "payment_attention", "payment_accepted", "payment_rejected")
def payment_email_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    payment = PaymentRequest.objects.select_related("asset__network").get(pk=params["payment_id"])
    # Lazy: rendered in the customer's language, which the outbox activates only to render.
    return {"payment": payment, "finality": lazy(finality_description, str)(payment.asset.network)}


@email_context("refund_opened", "refund_confirmed")
def refund_email_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    refund = Refund.objects.select_related("network").get(pk=params["refund_id"])
    return {"refund": refund, "amount": refund.amount_text, "network": refund.network.name}

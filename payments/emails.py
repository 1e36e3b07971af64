"""The payment emails' template context, for the outbox (shop/outbox.py)."""

from __future__ import annotations

from payments.models import PaymentRequest
from shop.models import Order
from shop.outbox import email_context


@email_context("payment_detected", "payment_confirmed", "payment_attention")
def payment_email_context(order: Order, params: dict) -> dict:
    return {"payment": PaymentRequest.objects.select_related("asset__network").get(pk=params["payment_id"])}

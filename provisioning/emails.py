"""The access emails' template context, for the outbox (orders/outbox.py)."""

from __future__ import annotations

from orders.models import Order
from orders.outbox import email_context


@email_context("access_ready", "access_ending")
def access_email_context(order: Order, params: dict) -> dict:
    grants = list(order.access_grants.handed_over().select_related("node"))
    return {"grants": grants, "hours": params.get("hours")}


@email_context("preparation_started", "access_ended")
def order_only_context(order: Order, params: dict) -> dict:
    return {}


@email_context("preparation_failed")
def preparation_failed_context(order: Order, params: dict) -> dict:
    return {"key_refused": bool(params.get("key_refused"))}

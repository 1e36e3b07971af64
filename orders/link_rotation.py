"""The order's private link made anew, when it leaked: the old link and token stop opening the order at once (the
token is an HMAC of the order's nonce, which every request checks against the row), and the new link is emailed
to the order's address, so that whoever holds the old one cannot keep the order from its owner."""

from __future__ import annotations

import secrets
from typing import Any

from django.db import transaction

from orders.models import Order
from orders.order_links import order_access_token
from orders.outbox import email_context, email_enqueue


def order_link_rotate(*, order_id: int) -> str:
    """A new nonce for the order, and the email with its new link (sent with the change). The new token."""
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=order_id)
        order.access_nonce = secrets.token_hex(16)
        order.save(update_fields=["access_nonce", "updated_at"])
        email_enqueue(order_id=order.pk, name="order_link_rotated")
    return order_access_token(order)


@email_context("order_link_rotated")
def order_link_rotated_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    return {}  # the new link is the email's `status_url`, made when it is sent

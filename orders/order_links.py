"""The order's secret link: the token in it, and the path of its status page (what emails and pages send)."""

from __future__ import annotations

from django.urls import reverse
from django.utils.crypto import salted_hmac

from orders.models import Order

TOKEN_SALT = "shop.order.access"  # noqa: S105 - an HMAC domain separator, not a secret


def order_access_token(order: Order, secret: str | None = None) -> str:
    """The order's secret link token, under SECRET_KEY unless another `secret` is given."""
    value = f"{order.reference}:{order.access_nonce}"
    return salted_hmac(TOKEN_SALT, value, secret=secret, algorithm="sha256").hexdigest()


def order_status_path(order: Order) -> str:
    return reverse("shop:order_status", kwargs={"reference": order.reference, "token": order_access_token(order)})


def order_receipt_path(order: Order) -> str:
    return reverse("shop:order_receipt", kwargs={"reference": order.reference, "token": order_access_token(order)})


KEY_FORM_ID = "ssh-key"  # the id of the order page's "Replace SSH key" form


def order_key_form_path(order: Order) -> str:
    """The order page at its "Replace SSH key" form: what the email about a refused key links to."""
    return f"{order_status_path(order)}#{KEY_FORM_ID}"

"""Reading what a customer and the database see, shared by the verification tests."""

from __future__ import annotations

from payments.models import PaymentRequest
from shop.models import Order

ORDERS_URL = "/api/v1/orders/"
CATALOG_URL = "/api/v1/catalog/"


def payment_of(placed: dict) -> PaymentRequest:
    return PaymentRequest.objects.get(order__reference=placed["reference"], extension=None)


def order_of(placed: dict) -> Order:
    return Order.objects.get(reference=placed["reference"])


def units(placed: dict) -> int:
    """The quoted amount, in base units, as the API gave it."""
    return int(placed["payment"]["amount_base_units"])


def order_steps(placed: dict) -> list[tuple[str, str, str]]:
    """(from, to, actor) of every recorded change of the order's status, oldest first."""
    return [(e.from_status, e.to_status, e.actor) for e in order_of(placed).events.all()]


def payment_steps(placed: dict) -> list[tuple[str, str]]:
    """(from, to) of every recorded change of the payment's status, oldest first."""
    return [(e.from_status, e.to_status) for e in payment_of(placed).events.all()]


def pay(chain, customer, scan_pass, *, short_by: int = 0) -> dict:
    """An order paid in USDC, `short_by` base units short of its quote, final after one block and a scan."""
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) - short_by)
    chain.mine(1)
    scan_pass()
    return placed

"""Reading what a customer and the database see, shared by the verification tests."""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from orders.models import Order
from orders.orders import order_transition
from payments.models import Network, PaymentRequest

ORDERS_URL = "/api/v1/orders/"
CATALOG_URL = "/api/v1/catalog/"


def local() -> Network:
    """The local network's row as it is now."""
    return Network.objects.get(slug="local")


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


def paid_in_usdc(chain, customer, scan_pass) -> dict:
    """An order for one lot paid in USDC and confirmed."""
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    customer.paid(placed, sent.tx_hash)
    chain.mine(1)
    scan_pass()
    assert customer.read(placed)["status"] == "paid"
    return placed


def rental_active(placed: dict, *, ends_in: dt.timedelta = dt.timedelta(days=7)) -> Order:
    """The order handed over (its preparation passed): active, its rental clock running."""
    with transaction.atomic():
        order = Order.objects.select_for_update().get(reference=placed["reference"])
        order_transition(order=order, to="preparing", actor="operator", reason="prepare")
        now = timezone.now()
        order.active_since, order.ends_at = now, now + ends_in
        order.save(update_fields=["active_since", "ends_at"])
        order_transition(order=order, to="active", actor="system", reason="every node passed its preflight")
    return order


def extend(customer, placed: dict, token: str | None = None, **body):
    """POST orders/<reference>/extend/ through the API with the order's token (or `token`)."""
    with customer.capture(execute=True):
        return customer.client.post(
            f"{ORDERS_URL}{placed['reference']}/extend/",
            body,
            content_type="application/json",
            headers={"X-Order-Token": token or placed["access_token"]},
        )


def settle_rounds(chain, scan_pass) -> None:
    """Two more blocks and a verifier pass: what was sent is final."""
    chain.mine(2)
    scan_pass()

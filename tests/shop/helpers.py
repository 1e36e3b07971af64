"""Shop test helpers shared by several files."""

from __future__ import annotations

from tests.placing import ORDERS_URL  # noqa: F401 - imported from here by the shop's tests

CATALOG_URL = "/api/v1/catalog/"
LOOKUP_URL = "/api/v1/orders/lookup/"


def stored_counts() -> dict[str, int]:
    """Everything placing an order stores or reserves."""
    from orders.models import Order, OrderEvent, Reservation
    from payments.models import AddressCursor, PaymentRequest

    return {
        model.__name__: model.objects.count()
        for model in (Order, OrderEvent, Reservation, PaymentRequest, AddressCursor)
    }


def order_running(reference: str, *, days: int = 7):
    """The order handed over through its transition writer (paid, preparing, active), its rental running for
    `days`: what the page of a rental shows (its Extend form) without a payment on the chain."""
    import datetime as dt

    from django.db import transaction
    from django.utils import timezone

    from orders.models import Order
    from orders.orders import order_transition

    with transaction.atomic():
        order = Order.objects.select_for_update().get(reference=reference)
        for status in ("paid", "preparing"):
            order_transition(order=order, to=status, actor="operator", reason="handed over in a test")
        order.active_since = timezone.now()
        order.ends_at = order.active_since + dt.timedelta(days=days)
        order.save(update_fields=["active_since", "ends_at"])
        order_transition(order=order, to="active", actor="system", reason="handed over in a test")
    return order

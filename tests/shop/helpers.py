"""Shop test helpers shared by several files."""

from __future__ import annotations

ORDERS_URL = "/api/v1/orders/"
CATALOG_URL = "/api/v1/catalog/"
LOOKUP_URL = "/api/v1/orders/lookup/"


def stored_counts() -> dict[str, int]:
    """Everything placing an order stores or reserves."""
    from payments.models import AddressCursor, PaymentRequest
    from shop.models import Order, OrderEvent, Reservation

    return {
        model.__name__: model.objects.count()
        for model in (Order, OrderEvent, Reservation, PaymentRequest, AddressCursor)
    }

"""Shop fixtures: an API client, only the `local` network configured, placing an order through the API, asking
"Find my order"."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from orders.models import Order
from tests.shop.helpers import LOOKUP_URL, ORDERS_URL


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def place_order(db, anvil, api_client, order_payload):
    """POST an order through the API; returns the 201 body. Fields override the valid payload."""

    def place(headers: dict[str, str] | None = None, **fields) -> dict:
        response = api_client.post(ORDERS_URL, {**order_payload, **fields}, format="json", headers=headers or {})
        assert response.status_code == 201, response.content
        return response.json()

    return place


@pytest.fixture
def orders(make_node, place_order):
    """Place one order per call (a node each) and return it."""

    def place(**fields) -> Order:
        make_node()
        return Order.objects.get(reference=place_order(**fields)["reference"])

    return place


@pytest.fixture
def lookup(django_capture_on_commit_callbacks):
    """POST an email to the API as a client would, letting the background work run (the commit's callbacks)."""

    def ask(email: str, client: Client | None = None, **extra):
        with django_capture_on_commit_callbacks(execute=True):
            return (client or Client()).post(LOOKUP_URL, {"email": email}, content_type="application/json", **extra)

    return ask

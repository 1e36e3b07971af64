"""Shop fixtures: placing an order through the API (tests/placing.py), one order per call with a node each, asking
"Find my order"."""

from __future__ import annotations

import pytest
from django.test import Client

from orders.models import Order
from tests.placing import api_client, place_order  # noqa: F401 - the API's own fixtures, shared
from tests.shop.helpers import LOOKUP_URL


@pytest.fixture
def orders(make_node, place_order):  # noqa: F811 - the fixture imported above
    """Orders placed through the API, one per call (a node each), as "Find my order" finds what customers typed."""

    def one_order(**fields) -> Order:
        make_node()
        return Order.objects.get(reference=place_order(**fields)["reference"])

    return one_order


@pytest.fixture
def lookup(django_capture_on_commit_callbacks):
    """POST an email to the API as a client would, letting the background work run (the commit's callbacks)."""

    def ask(email: str, client: Client | None = None, **extra):
        with django_capture_on_commit_callbacks(execute=True):
            return (client or Client()).post(LOOKUP_URL, {"email": email}, content_type="application/json", **extra)

    return ask

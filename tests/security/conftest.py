"""An order awaiting payment, placed through the API by a customer, for the security tests."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def placed(anvil, make_node, order_payload) -> dict:
    """The 201 body of a one-lot order (a node is added for it)."""
    make_node()
    response = Client().post("/api/v1/orders/", order_payload, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()

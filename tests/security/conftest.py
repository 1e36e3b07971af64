"""An order awaiting payment, placed through the API by a customer, for the security tests."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.placing import order_posted


@pytest.fixture
def placed(anvil, make_node, order_payload) -> dict:
    """The 201 body of a one-lot order (a node is added for it)."""
    make_node()
    return order_posted(Client(), order_payload)

"""Deployment checks: the compose file, `check --deploy`, the security headers and the rendered pages."""

from __future__ import annotations

import pytest

from tests.placing import order_posted


@pytest.fixture
def placed_order(db, anvil, client, make_node, order_payload, only_local_network) -> dict:
    """An order awaiting payment, placed through the API: its 201 body (`status_url` is its page).

    A second lot stays free, so that the wizard can still be walked."""
    make_node()
    make_node()
    return order_posted(client, order_payload)

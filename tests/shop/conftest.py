"""Shop fixtures: an API client, only the `local` network configured, placing an order through the API."""

from __future__ import annotations

import os

import pytest
from rest_framework.test import APIClient

from tests.shop.helpers import ORDERS_URL


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def only_local_network(monkeypatch):
    """No CHAIN_RPC_URLS_* from the shell leaks in: only `local` (which has a default URL) is configured."""
    for name in list(os.environ):
        if name.startswith("CHAIN_RPC_URLS_") and name != "CHAIN_RPC_URLS_LOCAL":
            monkeypatch.delenv(name)


@pytest.fixture
def place_order(db, anvil, api_client, order_payload):
    """POST an order through the API; returns the 201 body. Fields override the valid payload."""

    def place(headers: dict[str, str] | None = None, **fields) -> dict:
        response = api_client.post(ORDERS_URL, {**order_payload, **fields}, format="json", headers=headers or {})
        assert response.status_code == 201, response.content
        return response.json()

    return place

"""Placing an order through the API, `POST /api/v1/orders/`, as a customer does: for the tests whose subject is
that road (the answer, the rate limits, the worker that sends its email, the quote). A test that only needs an
order in some state builds it instead (tests/stored_rows.py: `an_order`), without a chain or the API.

In this process (the Django test client, or DRF's): `order_post`, `order_posted`, the `place_order` fixture. Over
HTTP to a shop served by another process (gunicorn, in the fault tests): `order_posted_to`.

A folder's conftest imports the fixtures it uses (`from tests.placing import api_client, place_order`)."""

from __future__ import annotations

import json

import pytest
import requests
from rest_framework.test import APIClient

ORDERS_URL = "/api/v1/orders/"


def order_post(client, payload: dict, **extra):  # noqa: ANN001, ANN201 - a Django Client or DRF's APIClient
    """POST `payload` as JSON to the orders endpoint; the answer, whatever it is."""
    return client.post(ORDERS_URL, json.dumps(payload), content_type="application/json", **extra)


def order_posted(client, payload: dict, **extra) -> dict:  # noqa: ANN001
    """POST `payload` to the orders endpoint, which must place it: the 201 body."""
    response = order_post(client, payload, **extra)
    assert response.status_code == 201, response.content
    return response.json()


def order_posted_to(base_url: str, payload: dict, *, timeout: float = 15) -> dict:
    """POST `payload` as JSON to the orders endpoint of the shop served at `base_url` (over HTTP, each request
    bounded by `timeout` seconds), which must place it: the 201 body."""
    response = requests.post(base_url + ORDERS_URL, json=payload, timeout=timeout)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def place_order(db, anvil, api_client, order_payload):
    """POST an order through the API (a live anvil quotes it); returns the 201 body. Fields override the valid
    payload (tests/conftest.py's `order_payload`); the test adds the nodes it holds."""

    def place(headers: dict[str, str] | None = None, **fields) -> dict:
        return order_posted(api_client, {**order_payload, **fields}, headers=headers or {})

    return place

"""An order opens only with its own token: a wrong, another order's or a truncated token is a plain 404."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.api_answers import error_fields
from tests.placing import order_posted
from tests.security.helpers import page_path


@pytest.fixture
def two_orders(anvil, make_node, order_payload) -> tuple[dict, dict]:
    placed = []
    for _ in range(2):
        make_node()
        placed.append(order_posted(Client(), order_payload))
    return placed[0], placed[1]


def bad_tokens(mine: dict, other: dict) -> dict[str, str]:
    token = mine["access_token"]
    return {
        "wrong": "0" * len(token),
        "another order's": other["access_token"],
        "truncated": token[:-1],
        "extended": token + "0",
        "upper case": token.upper(),
    }


def without_request_id(response) -> bytes:
    """The body as sent, with the request's own id (different for every request) taken out."""
    return response.content.replace(response["X-Request-ID"].encode(), b"")


def test_the_api_answers_404_for_every_bad_token_and_200_for_the_right_one(two_orders):
    mine, other = two_orders
    url = f"/api/v1/orders/{mine['reference']}/"
    client = Client()

    for what, token in bad_tokens(mine, other).items():
        for method in ("get", "post"):
            target = url if method == "get" else url + "paid/"
            response = getattr(client, method)(target, headers={"X-Order-Token": token})
            assert response.status_code == 404, (what, method)
            assert mine["reference"] not in response.content.decode()  # never says the order exists
    missing = client.get(url)
    unknown = client.get("/api/v1/orders/B2-ZZZZ-ZZZZ/", headers={"X-Order-Token": mine["access_token"]})
    assert (missing.status_code, unknown.status_code) == (404, 404)
    # the same answer whether the order exists or not, but for each request's own id
    assert error_fields(missing, "not_found") == error_fields(unknown, "not_found")
    assert without_request_id(missing) == without_request_id(unknown)
    assert client.get(url, headers={"X-Order-Token": mine["access_token"]}).status_code == 200


def test_the_order_pages_answer_404_for_every_bad_token(two_orders):
    mine, other = two_orders
    client = Client()

    for what, token in bad_tokens(mine, other).items():
        base = f"/o/{mine['reference']}/{token}/"
        assert client.get(base).status_code == 404, what
        assert client.post(base + "paid/").status_code == 404, what
        assert client.get(base + "manifest.json").status_code == 404, what
    assert client.get(page_path(mine)).status_code == 200

"""Rate limits answer 429 with Retry-After once an IP has used up its budget."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from core.ratelimit import TOKEN_CHECKED
from shop import api_urls
from shop import urls as shop_urls
from shop.order_api_base import TokenOrderApi
from tests.security.helpers import page_path


@pytest.fixture
def limits_on(settings):
    settings.RATELIMIT_ENABLE = True
    settings.RATELIMIT_TOKEN_FAILURES = 3
    cache.clear()
    yield settings
    cache.clear()


@pytest.mark.django_db
def test_token_guesses_from_one_ip_are_refused_with_429_after_the_limit(client, limits_on):
    # Given three wrong-token reads from one IP
    for _ in range(3):
        assert client.get("/api/v1/orders/NOPE/", HTTP_X_ORDER_TOKEN="x").status_code == 404
    # When the IP tries again, then it gets 429 with a JSON detail and Retry-After
    response = client.get("/api/v1/orders/NOPE/", HTTP_X_ORDER_TOKEN="x")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "detail" in response.json()
    # And the order pages are refused too, with an HTML page
    page = client.get("/o/NOPE/x/")
    assert page.status_code == 429 and b"Too many requests" in page.content


@pytest.mark.django_db
def test_with_limits_off_wrong_tokens_stay_plain_404(client, limits_on):
    limits_on.RATELIMIT_ENABLE = False
    for _ in range(5):
        assert client.get("/api/v1/orders/NOPE/", HTTP_X_ORDER_TOKEN="x").status_code == 404


def _extend_api(client, placed: dict, token: str):
    return client.post(
        f"/api/v1/orders/{placed['reference']}/extend/",
        {"duration_days": 7},
        content_type="application/json",
        headers={"X-Order-Token": token},
    )


def _refund_address_api(client, placed: dict, token: str):
    return client.post(
        f"/api/v1/orders/{placed['reference']}/refunds/1/address/",
        {"address": "0x" + "11" * 20},
        content_type="application/json",
        headers={"X-Order-Token": token},
    )


def _page_with_token(placed: dict, token: str) -> str:
    return page_path(placed).replace(placed["access_token"], token)


def _extend_page(client, placed: dict, token: str):
    return client.post(_page_with_token(placed, token) + "extend/", {"duration_days": 7})


def _refund_address_page(client, placed: dict, token: str):
    return client.post(_page_with_token(placed, token) + "refunds/1/address/", {"address": "0x" + "11" * 20})


@pytest.mark.django_db
@pytest.mark.parametrize(
    "post",
    [_extend_api, _refund_address_api, _extend_page, _refund_address_page],
    ids=["api-extend", "api-refund-address", "page-extend", "page-refund-address"],
)
def test_wrong_tokens_on_extend_and_refund_address_count_as_guesses(limits_on, placed, post):
    # Given a client that sent three wrong tokens for a real order on the endpoint
    guesser = Client(REMOTE_ADDR="198.51.100.7")
    assert [post(guesser, placed, "wrong-token").status_code for _ in range(3)] == [404, 404, 404]

    # When it sends the right token, then it is refused as on the order API, and the order API refuses it too
    refused = post(guesser, placed, placed["access_token"])
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    read = guesser.get(f"/api/v1/orders/{placed['reference']}/", HTTP_X_ORDER_TOKEN=placed["access_token"])
    assert read.status_code == 429
    # And the customer, from their own address, is answered (not 429)
    assert post(Client(REMOTE_ADDR="198.51.100.8"), placed, placed["access_token"]).status_code != 429


def test_every_page_under_the_order_token_is_token_checked():
    # The pages take the token in the path; the API's token-checked views are the order's own (not staff's)
    pages = {f"shop:{pattern.name}" for pattern in shop_urls.urlpatterns if "<str:token>" in str(pattern.pattern)}
    api = {"api_order_detail"} | {
        pattern.name
        for pattern in api_urls.urlpatterns
        if issubclass(getattr(pattern.callback, "view_class", object), TokenOrderApi)
    }
    assert {"api_order_paid", "api_order_extend", "api_refund_address", "api_order_link_rotate"} <= api

    assert pages and pages | api <= TOKEN_CHECKED, sorted((pages | api) - TOKEN_CHECKED)

"""Placing orders, "I have paid" and extending are limited per client IP: past the budget, 429 with Retry-After,
nothing stored."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from orders.models import Extension, Order
from payments.models import Notice, PaymentRequest
from tests.placing import order_post
from tests.security.helpers import page_path


@pytest.fixture
def limits_on(settings):
    settings.RATELIMIT_ENABLE = True
    settings.RATELIMIT_ORDERS = 2
    settings.RATELIMIT_PAID = 3
    settings.RATELIMIT_EXTENSIONS = 3
    cache.clear()
    yield settings
    cache.clear()


def test_a_third_order_from_one_ip_is_refused_with_429_and_nothing_is_stored(
    limits_on, anvil, make_node, order_payload
):
    for _ in range(3):
        make_node()
    client = Client()
    assert [order_post(client, order_payload).status_code for _ in range(2)] == [201, 201]

    refused = order_post(client, order_payload)
    wizard = client.post("/order/review/", {"place": "1"})

    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "try again in" in refused.json()["detail"]
    assert wizard.status_code == 429 and int(wizard["Retry-After"]) > 0  # the wizard shares the budget
    assert Order.objects.count() == PaymentRequest.objects.count() == 2
    # Another client address still orders
    assert order_post(Client(REMOTE_ADDR="203.0.113.9"), order_payload).status_code == 201


def test_i_have_paid_past_the_limit_is_refused_with_429_and_stores_no_notice(
    limits_on, anvil, make_node, order_payload
):
    make_node()
    client = Client()
    placed = order_post(client, order_payload).json()
    paid = f"/api/v1/orders/{placed['reference']}/paid/"
    headers = {"X-Order-Token": placed["access_token"]}

    answers = [client.post(paid, {}, content_type="application/json", headers=headers).status_code for _ in range(4)]

    assert answers == [202, 202, 202, 429]
    assert Notice.objects.count() == 3


def test_behind_a_trusted_proxy_the_limit_follows_the_forwarded_client_address(
    limits_on, anvil, make_node, order_payload
):
    limits_on.RATELIMIT_TRUSTED_PROXIES = 1
    for _ in range(4):
        make_node()
    proxy = Client(REMOTE_ADDR="10.0.0.2")

    first = [order_post(proxy, order_payload, HTTP_X_FORWARDED_FOR="198.51.100.1").status_code for _ in range(3)]
    # A client cannot escape by forging the left of the header: the proxy appends the address it saw
    forged = order_post(proxy, order_payload, HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.1").status_code
    other = order_post(proxy, order_payload, HTTP_X_FORWARDED_FOR="198.51.100.2").status_code

    assert first == [201, 201, 429]
    assert (forged, other) == (429, 201)


def test_extending_past_the_limit_is_refused_with_429_on_the_api_and_the_page(limits_on, placed):
    # Given a client that asked to extend an order three times (each answered, here 409: it does not run yet)
    client = Client()
    extend = f"/api/v1/orders/{placed['reference']}/extend/"
    headers = {"X-Order-Token": placed["access_token"]}
    answers = [
        client.post(extend, {"duration_days": 3}, content_type="application/json", headers=headers).status_code
        for _ in range(4)
    ]
    # The order page's Extend form shares the budget
    form = client.post(f"{page_path(placed)}extend/", {"duration_days": 3, "payment_option": "local:USDC"})

    assert answers == [409, 409, 409, 429]
    assert form.status_code == 429 and int(form["Retry-After"]) > 0
    assert Extension.objects.count() == 0
    # Another client address still gets an answer
    other = Client(REMOTE_ADDR="203.0.113.9")
    assert other.post(extend, {"duration_days": 3}, content_type="application/json", headers=headers).status_code == 409


@pytest.mark.parametrize(
    ("language", "text"),
    [("es", "Demasiadas solicitudes. Vuelva a intentarlo"), ("fr", "Trop de requêtes. Réessayez dans")],
)
def test_the_429_page_speaks_the_customers_language(db, limits_on, language, text):
    limits_on.RATELIMIT_TOKEN_FAILURES = 1
    client = Client(headers={"Accept-Language": language})
    client.get("/o/B2-AAAA-BBBB/wrong/")

    page = client.get("/o/B2-AAAA-BBBB/wrong/")

    assert page.status_code == 429
    assert text in page.content.decode()

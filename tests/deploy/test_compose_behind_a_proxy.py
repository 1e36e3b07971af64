"""The compose stack behind its TLS proxy: the rate limits count each client the proxy forwards, not the proxy.

The settings are the ones the web service computes from docker-compose.yml's environment (with an operator's
`.env`), read in a fresh interpreter; every request comes from the proxy's address with the client's address
appended to X-Forwarded-For, as a TLS proxy in front of the published port sends it."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from tests.deploy.settings_env import compose_operator_values, compose_service_environment, settings_under
from tests.security.helpers import page_path

# Where the proxy's connections come from, as the web container sees them through the published port.
PROXY = "172.18.0.1"
ATTACKER, CUSTOMER = "198.51.100.66", "203.0.113.20"
LOOKUP_URL = "/api/v1/orders/lookup/"
ORDERS_URL = "/api/v1/orders/"

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def compose_limits() -> dict[str, object]:
    return settings_under(compose_service_environment("web", compose_operator_values()), "RATELIMIT_")


@pytest.fixture
def limits_as_composed(settings, compose_limits) -> dict[str, object]:
    for name, value in compose_limits.items():
        setattr(settings, name, value)
    cache.clear()
    yield compose_limits
    cache.clear()


def through_the_proxy(client_address: str) -> Client:
    return Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=client_address, HTTP_X_FORWARDED_PROTO="https")


def test_one_clients_token_guesses_lock_out_that_client_not_the_other_customers(limits_as_composed, placed_order):
    # Given the compose stack's limits (they are on), and a customer's order
    guesses = limits_as_composed["RATELIMIT_TOKEN_FAILURES"]
    assert limits_as_composed["RATELIMIT_ENABLE"] and guesses == 20
    attacker, customer = through_the_proxy(ATTACKER), through_the_proxy(CUSTOMER)
    wrong = page_path(placed_order).replace(placed_order["access_token"], "wrong-token")

    # When one client behind the proxy guesses tokens until it is refused
    answers = [attacker.get(wrong).status_code for _ in range(guesses + 1)]

    # Then that client is refused, even with the right token
    assert answers == [404] * guesses + [429]
    assert attacker.get(page_path(placed_order)).status_code == 429
    # nor escapes by writing another address into the header: the proxy appends the one it saw
    forged = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=f"{CUSTOMER}, {ATTACKER}")
    assert forged.get(page_path(placed_order)).status_code == 429
    # And the customer, behind the same proxy, still reads their own order page and API
    assert customer.get(page_path(placed_order)).status_code == 200
    api = customer.get(f"{ORDERS_URL}{placed_order['reference']}/", HTTP_X_ORDER_TOKEN=placed_order["access_token"])
    assert api.status_code == 200


def test_the_order_and_lookup_limits_count_each_forwarded_client(limits_as_composed, placed_order, order_payload):
    orders, lookups = limits_as_composed["RATELIMIT_ORDERS"], limits_as_composed["RATELIMIT_LOOKUPS"]
    attacker, customer = through_the_proxy(ATTACKER), through_the_proxy(CUSTOMER)

    # When one client behind the proxy uses up its "Find my order" and its orders (empty ones count too)
    asked = [
        attacker.post(LOOKUP_URL, {"email": f"person{n}@example.org"}, content_type="application/json").status_code
        for n in range(lookups + 1)
    ]
    placed = [attacker.post(ORDERS_URL, {}, content_type="application/json").status_code for _ in range(orders + 1)]

    # Then that client is refused
    assert asked == [202] * lookups + [429]
    assert placed == [400] * orders + [429]
    # And another client behind the same proxy still finds its order and places one
    own = customer.post(LOOKUP_URL, {"email": order_payload["email"]}, content_type="application/json")
    assert own.status_code == 202
    assert customer.post(ORDERS_URL, order_payload, content_type="application/json").status_code == 201

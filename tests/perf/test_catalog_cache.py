"""The cached catalog (shop/catalog.py): pages read it without a query, yet a staff change shows at once, a
network the scan finds down is hidden within the cache's few seconds, and the cached count of free lots never
lets an order through that capacity refuses, nor refuses one that capacity allows."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from orders.models import Duration, Reservation
from payments.models import Network
from provisioning.models import Node
from shop import catalog
from tests.api_answers import error_fields

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("anvil")]
ORDERS_URL = "/api/v1/orders/"
CATALOG_URL = "/api/v1/catalog/"


def queries_of(request) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = request()
    assert response.status_code == 200
    return len(captured.captured_queries)


def offered(client: Client) -> list[str]:
    return [network["slug"] for network in client.get(CATALOG_URL).json()["networks"]]


def test_once_the_catalog_is_read_the_home_page_and_the_catalog_api_make_no_query(client, make_node):
    # Given a shop with free nodes whose catalog was read once
    make_node()
    assert client.get("/").status_code == 200

    # When the home page and the catalog API are read again
    # Then neither asks the database anything (no session, no catalog, no count of free lots)
    assert queries_of(lambda: client.get("/")) == 0
    assert queries_of(lambda: client.get(CATALOG_URL)) == 0


def test_a_price_staff_change_shows_on_the_next_page_and_in_the_next_order(client, make_node, order_payload):
    # Given a home page already read (the catalog and its fragments cached)
    make_node()
    assert "2,990.00" not in client.get("/").content.decode()

    # When staff change the 7-day price
    week = Duration.objects.get(days=7)
    week.price_per_lot_usd = Decimal("2990.00")
    week.save()

    # Then the next home page shows it, and the next order is priced with it
    assert "2,990.00 USD" in client.get("/").content.decode()
    response = client.post(ORDERS_URL, order_payload, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["total_usd"] == "2990.00"


def test_a_network_the_scan_finds_down_is_no_longer_offered_within_the_cache_lifetime(client, monkeypatch):
    # Given the local network offered, and the catalog cached for 1 s instead of 5
    monkeypatch.setattr(catalog, "CATALOG_CACHE_SECONDS", 1)
    catalog.catalog_forget()
    assert "local" in offered(client)

    # When a scan pass in another process records it down (a queryset update: no signal reaches this cache)
    Network.objects.filter(slug="local").update(rpc_ok=False)

    # Then the catalog stops offering it within the cache's lifetime
    deadline = time.monotonic() + 5
    while "local" in offered(client):
        assert time.monotonic() < deadline, "still offered 5 s after the scan recorded it down"
        time.sleep(0.1)


def test_a_stale_count_of_free_lots_never_lets_through_an_order_that_capacity_refuses(client, make_node, order_payload):
    # Given two free nodes, counted and shown as two
    first, _second = make_node(), make_node()
    assert client.get(CATALOG_URL).json()["lots_available"] == 2

    # When one goes into maintenance behind the cache's back, and a customer orders two lots
    Node.objects.filter(pk=first.pk).update(state="maintenance")
    response = client.post(ORDERS_URL, {**order_payload, "lots": 2}, content_type="application/json")

    # Then the order is refused with the true count, and nothing is held
    assert response.status_code == 400, response.content
    assert error_fields(response, "invalid") == {"lots": ["Only 1 lot is available right now."]}
    assert not Reservation.objects.exists()


def test_a_stale_count_of_zero_never_refuses_an_order_that_capacity_allows(client, make_node, order_payload):
    # Given a sold-out shop, counted and shown as sold out
    assert client.get(CATALOG_URL).json()["lots_available"] == 0

    # When a node is added behind the cache's back, and a customer orders one lot
    make_node()
    response = client.post(ORDERS_URL, order_payload, content_type="application/json")

    # Then the order is placed
    assert response.status_code == 201, response.content


def test_the_count_shown_drops_by_the_lots_of_an_order_placed_at_once(client, make_node, order_payload):
    # Given five free nodes, shown as five
    for _ in range(5):
        make_node()
    assert client.get(CATALOG_URL).json()["lots_available"] == 5

    # When an order for two lots is placed
    response = client.post(ORDERS_URL, {**order_payload, "lots": 2}, content_type="application/json")
    assert response.status_code == 201, response.content

    # Then the catalog and the home page show three at once
    assert client.get(CATALOG_URL).json()["lots_available"] == 3
    assert "3 lots available now." in client.get("/").content.decode()

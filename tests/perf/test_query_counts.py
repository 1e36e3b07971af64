"""Every page, API call and admin list costs the same number of database queries with 1 and with 100 orders,
nodes, assets, credits, events and preparation runs: nothing is fetched once per row (no N+1)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.perf.conftest import World

Request = Callable[[World, Client], object]


def _path(url: str) -> str:
    """The path of an absolute URL the API returned."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def _api_order(world: World, client: Client):
    placed = world.paid
    return client.get(f"/api/v1/orders/{placed['reference']}/", headers={"X-Order-Token": placed["access_token"]})


def _api_place(world: World, client: Client):
    world.make_node()  # the lot this order takes
    return client.post("/api/v1/orders/", world.order_payload, content_type="application/json")


def _admin_change(model: str, placed_key: str) -> Request:
    def get(world: World, client: Client):
        order = world.__dict__[placed_key]["order"]
        pk = order.payment.pk if model == "payments/paymentrequest" else order.pk
        return client.get(f"/admin/{model}/{pk}/change/")

    return get


CUSTOMER_PAGES: dict[str, tuple[Request, int]] = {
    "home": (lambda w, c: c.get("/"), 200),
    "catalog page (order wizard)": (lambda w, c: c.get("/order/"), 200),
    "payment page (awaiting payment, QR)": (lambda w, c: c.get(_path(w.awaiting["status_url"])), 200),
    "order status page (paid, 1-100 credits)": (lambda w, c: c.get(_path(w.paid["status_url"])), 200),
    "GET /api/v1/catalog/": (lambda w, c: c.get("/api/v1/catalog/"), 200),
    "GET /api/v1/orders/<ref>/": (_api_order, 200),
    "POST /api/v1/orders/": (_api_place, 201),
}
STAFF_PAGES: dict[str, tuple[Request, int]] = {
    "admin orders": (lambda w, c: c.get("/admin/orders/order/"), 200),
    "admin payments": (lambda w, c: c.get("/admin/payments/paymentrequest/"), 200),
    "admin nodes": (lambda w, c: c.get("/admin/fleet/node/"), 200),
    "admin preparation runs": (lambda w, c: c.get("/admin/provisioning/preparationrun/"), 200),
    "admin assets (network page)": (lambda w, c: c.get("/admin/payments/network/"), 200),
    "admin order page (events inline)": (_admin_change("orders/order", "paid"), 200),
    "admin payment page (credits, events)": (_admin_change("payments/paymentrequest", "paid"), 200),
    "admin credits": (lambda w, c: c.get("/admin/payments/credit/"), 200),
    "admin payment events": (lambda w, c: c.get("/admin/payments/paymentevent/"), 200),
    "admin refund events": (lambda w, c: c.get("/admin/payments/refundevent/"), 200),
    "admin order events": (lambda w, c: c.get("/admin/orders/orderevent/"), 200),
    "admin node events": (lambda w, c: c.get("/admin/fleet/nodeevent/"), 200),
}


def queries(request: Request, world: World, client: Client, expected_status: int) -> int:
    """Queries of one request, measured after an identical warm-up (caches and the session are filled)."""
    assert request(world, client).status_code == expected_status
    with CaptureQueriesContext(connection) as captured:
        response = request(world, client)
    assert response.status_code == expected_status, getattr(response, "content", b"")[:500]
    return len(captured.captured_queries)


def _same_cost(request: Request, world: World, client: Client, status: int, name: str) -> int:
    # Given a shop with 1 of each
    world.grow(1)
    small = queries(request, world, client, status)
    # When it holds 100 of each
    world.grow(100)
    large = queries(request, world, client, status)
    # Then the request makes exactly as many queries
    print(f"\nqueries: {name}: {small} with 1, {large} with 100")
    assert large == small, f"{name}: {small} queries with 1 of each, {large} with 100"
    return large


# What each customer request costs once the catalog is cached (shop/catalog.py), for a returning visitor.
# Before the cache: home 6, catalog page 13, payment and status pages 7, catalog API 6, order API 7, placing 29.
QUERY_BUDGET = {
    "home": 0,
    "catalog page (order wizard)": 1,  # the visitor's session
    # The order's version (token, ETag, its transactions and notices), then, unless the page or body is kept
    # for that version, the order with its payment, asset, network and preparation (shop/order_version.py).
    "payment page (awaiting payment, QR)": 2,
    "order status page (paid, 1-100 credits)": 2,
    "GET /api/v1/catalog/": 0,
    "GET /api/v1/orders/<ref>/": 2,
    # The test's node insert, and the count of free lots it makes stale counted again; the ETH rate; then the
    # order's one transaction: the node locks, the order and its event, its lots held (one INSERT ... SELECT that
    # also looks for lapsed holds), its address index taken (one UPDATE ... RETURNING), its payment request, its
    # email and the job that sends it. The start block is a head read seconds ago (cached): no query, no RPC.
    "POST /api/v1/orders/": 13,
}


@pytest.mark.parametrize("name", CUSTOMER_PAGES)
def test_a_customer_page_makes_as_many_queries_with_100_of_each_as_with_1(world, name):
    request, status = CUSTOMER_PAGES[name]
    _same_cost(request, world, Client(), status, name)


@pytest.mark.parametrize("name", CUSTOMER_PAGES)
def test_a_customer_page_stays_within_its_query_budget(world, name):
    # Given a shop with 100 of each, a returning visitor, and the catalog cached
    request, status = CUSTOMER_PAGES[name]
    world.grow(100)

    # When the visitor makes the request
    spent = queries(request, world, Client(), status)

    # Then it costs no more queries than its budget
    assert spent <= QUERY_BUDGET[name], f"{name}: {spent} queries, budget {QUERY_BUDGET[name]}"


@pytest.mark.parametrize("name", STAFF_PAGES)
def test_an_admin_page_makes_as_many_queries_with_100_of_each_as_with_1(world, django_user_model, name):
    request, status = STAFF_PAGES[name]
    staff = Client()
    staff.force_login(django_user_model.objects.create_superuser("perf-admin", "admin@example.org", "pw-not-used"))
    _same_cost(request, world, staff, status, name)

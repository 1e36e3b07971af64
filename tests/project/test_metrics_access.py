"""/metrics: who may read it, what it shows, and the request histogram that moves with each request.

Without METRICS_TOKEN only loopback clients get the numbers; a request that came through a proxy is not one,
whatever address the proxy connects from. With a token every client needs it, loopback too.
"""

from __future__ import annotations

import pytest

from tests.metrics_scrape import METRICS_URL, family_names, parse, scrape, value

TOKEN = "0123456789abcdef0123456789abcdef0123"
# The contract's families (CONTRACT.md) and those the alert rules add.
FAMILIES = {
    "shop_orders",
    "shop_lots_available",
    "payments_open",
    "payments_scan_lag_blocks",
    "payments_scan_last_success_timestamp_seconds",
    "payments_rpc_errors_total",
    "payments_unexpected_outflows_total",
    "provisioning_nodes",
    "provisioning_preparations_total",
    "outbox_emails_pending",
    "payments_scan_lag_budget_blocks",
    "payments_network_up",
    "payments_review_oldest_seconds",
    "shop_paid_unprepared_oldest_seconds",
    "http_request_duration_seconds",
    "payments_refunds_planned_again",
}

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_token(settings):
    settings.METRICS_TOKEN = ""


def test_a_loopback_client_reads_every_family_in_the_prometheus_text_format(client):
    response = client.get(METRICS_URL)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert family_names(response.content.decode()) >= FAMILIES


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_both_loopback_addresses_are_loopback(client, address):
    assert client.get(METRICS_URL, REMOTE_ADDR=address).status_code == 200


@pytest.mark.parametrize("address", ["203.0.113.7", "10.0.0.5", "172.17.0.1", "not an address"])
def test_a_client_that_is_not_on_loopback_is_refused_without_a_token(client, address):
    response = client.get(METRICS_URL, REMOTE_ADDR=address)

    assert response.status_code == 403
    assert b"shop_orders" not in response.content


@pytest.mark.parametrize(
    "header",
    [
        "HTTP_X_FORWARDED_FOR",
        "HTTP_FORWARDED",
        "HTTP_X_REAL_IP",
        "HTTP_X_FORWARDED_PROTO",
        "HTTP_VIA",
        "HTTP_X_FORWARDED_HOST",
        "HTTP_X_CLIENT_IP",
        "HTTP_TRUE_CLIENT_IP",
        "HTTP_X_FORWARDED_PORT",
        "HTTP_CF_CONNECTING_IP",
    ],
    ids=[
        "x-forwarded-for",
        "forwarded",
        "x-real-ip",
        "x-forwarded-proto",
        "via",
        "x-forwarded-host",
        "x-client-ip",
        "true-client-ip",
        "x-forwarded-port",
        "cf-connecting-ip",
    ],
)
def test_a_request_through_a_proxy_is_not_a_loopback_client_whatever_it_claims(client, header):
    # A proxy on the same machine connects from loopback on behalf of anyone; the header names loopback too
    response = client.get(METRICS_URL, REMOTE_ADDR="127.0.0.1", **{header: "127.0.0.1"})

    assert response.status_code == 403
    # and a client far away cannot claim to be loopback with the header either
    assert client.get(METRICS_URL, REMOTE_ADDR="203.0.113.7", **{header: "127.0.0.1"}).status_code == 403


def test_with_a_token_set_every_client_needs_it_loopback_too(client, settings):
    settings.METRICS_TOKEN = TOKEN

    missing = client.get(METRICS_URL)
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert b"shop_orders" not in missing.content

    answered = client.get(METRICS_URL, REMOTE_ADDR="203.0.113.7", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answered.status_code == 200 and b"shop_orders" in answered.content


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer ", f"Basic {TOKEN}", TOKEN, f"Bearer{TOKEN}"],
    ids=["longer", "shorter", "empty", "basic", "no-scheme", "no-space"],
)
def test_a_wrong_token_is_refused(client, settings, authorization):
    settings.METRICS_TOKEN = TOKEN

    response = client.get(METRICS_URL, REMOTE_ADDR="203.0.113.7", HTTP_AUTHORIZATION=authorization)

    assert response.status_code == 401
    assert b"shop_orders" not in response.content


def test_only_get_is_answered(client):
    assert client.post(METRICS_URL).status_code == 405


def test_each_request_moves_its_views_latency_histogram_labelled_by_view_never_by_path(client):
    before = scrape(client)
    home_before = value(before, "http_request_duration_seconds_count", view="shop:home") or 0

    client.get("/")
    client.get("/")
    for n in range(3):  # a scanner's paths: one series for all of them
        client.get(f"/wp-admin/{n}/setup.php")
    after = scrape(client)

    assert value(after, "http_request_duration_seconds_count", view="shop:home") == home_before + 2
    unresolved_before = value(before, "http_request_duration_seconds_count", view="unresolved") or 0
    assert value(after, "http_request_duration_seconds_count", view="unresolved") == unresolved_before + 3
    assert value(after, "http_request_duration_seconds_bucket", view="shop:home", le="+Inf") == home_before + 2
    views = {dict(labels).get("view") for name, labels in after if name.startswith("http_request_duration")}
    assert not any("wp-admin" in view or "/" in view for view in views), views


def test_every_order_status_and_node_state_has_a_series_even_at_zero(client):
    samples = parse(client.get(METRICS_URL).content.decode())

    assert value(samples, "shop_orders", status="active") == 0
    assert value(samples, "provisioning_nodes", state="failed") == 0
    assert value(samples, "provisioning_preparations_total", result="failed") == 0
    assert value(samples, "outbox_emails_pending") == 0
    assert value(samples, "payments_unexpected_outflows_total") == 0

"""GET /api/v1/catalog/: what a lot is, durations, preparations, payment networks, and how many lots are free."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from django.utils import timezone

from payments.models import Asset, Rate
from tests.shop.helpers import CATALOG_URL

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]

BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"


def catalog(api_client) -> dict:
    response = api_client.get(CATALOG_URL)
    assert response.status_code == 200
    return response.json()


def network(body: dict, slug: str) -> dict | None:
    return next((n for n in body["networks"] if n["slug"] == slug), None)


def test_the_lot_is_two_b200_cards_with_180_gb_each(api_client):
    # Given the default catalog / When a client reads it
    lot = catalog(api_client)["lot"]

    # Then a lot is two NVIDIA B200 cards of 180 GB each
    assert lot["gpus_per_lot"] == 2
    assert lot["gpu_model"] == "NVIDIA B200"
    assert lot["gpu_memory_gb"] == 180


def test_durations_are_3_7_and_30_days_each_with_a_price_and_a_purpose(api_client):
    # Given the default catalog / When a client reads it
    durations = catalog(api_client)["durations"]

    # Then the three durations come in order, priced per lot, each saying what it is for
    assert [d["days"] for d in durations] == [3, 7, 30]
    prices = [Decimal(d["price_per_lot_usd"]) for d in durations]
    assert all(price > 0 for price in prices)
    assert prices == sorted(prices)
    assert all(d["purpose"].strip() for d in durations)


def test_the_three_preparations_are_offered(api_client):
    # Given the default catalog / When a client reads it
    preparations = catalog(api_client)["preparations"]

    # Then the three preparations are listed with a name and a description
    assert [p["slug"] for p in preparations] == ["bare-node", "pytorch-blackwell", "two-card-distributed"]
    assert all(p["name"] and p["description"] for p in preparations)


def test_only_the_local_chain_is_offered_when_no_other_rpc_url_is_set(api_client):
    # Given no CHAIN_RPC_URLS_* besides the local chain's default
    # When a client reads the catalog
    networks = catalog(api_client)["networks"]

    # Then only `local` is offered, paid in its ether
    assert [n["slug"] for n in networks] == ["local"]
    assert networks[0]["chain_id"] == 31337
    assets = {asset["symbol"]: asset for asset in networks[0]["assets"]}
    assert assets["ETH"]["decimals"] == 18
    assert assets["ETH"]["contract"] is None


def test_base_is_offered_with_its_usdc_and_usdt_once_its_rpc_url_is_configured(api_client, monkeypatch):
    # Given an RPC URL for Base in the environment
    monkeypatch.setenv("CHAIN_RPC_URLS_BASE", "http://127.0.0.1:9,http://127.0.0.1:10")

    # When a client reads the catalog
    base = network(catalog(api_client), "base")

    # Then Base is offered with its stablecoins, 6 decimals, at their real contracts
    assert base is not None
    assert base["chain_id"] == 8453
    assets = {asset["symbol"]: asset for asset in base["assets"]}
    assert assets["USDC"]["decimals"] == 6
    assert assets["USDC"]["contract"] == BASE_USDC
    assert assets["USDT"]["decimals"] == 6
    assert assets["USDT"]["contract"].startswith("0x")


def test_base_ether_is_not_offered_without_a_fresh_usd_rate(api_client, monkeypatch):
    # Given Base configured, and only a rate for its ether that is an hour old
    monkeypatch.setenv("CHAIN_RPC_URLS_BASE", "http://127.0.0.1:9")
    eth = Asset.objects.get(network__slug="base", symbol="ETH")
    Rate.objects.create(asset=eth, usd_per_unit=Decimal("3100"), as_of=timezone.now() - dt.timedelta(hours=1))

    # When a client reads the catalog
    base = network(catalog(api_client), "base")

    # Then ether cannot be chosen on Base: it could not be priced
    assert sorted(asset["symbol"] for asset in base["assets"]) == ["USDC", "USDT"]


def test_base_ether_is_offered_once_a_fresh_usd_rate_exists(api_client, monkeypatch):
    # Given Base configured and a rate for its ether taken just now
    monkeypatch.setenv("CHAIN_RPC_URLS_BASE", "http://127.0.0.1:9")
    eth = Asset.objects.get(network__slug="base", symbol="ETH")
    Rate.objects.create(asset=eth, usd_per_unit=Decimal("3100"), as_of=timezone.now())

    # When a client reads the catalog
    base = network(catalog(api_client), "base")

    # Then ether is offered on Base as the native coin (no contract)
    assets = {asset["symbol"]: asset for asset in base["assets"]}
    assert sorted(assets) == ["ETH", "USDC", "USDT"]
    assert assets["ETH"]["contract"] is None
    assert assets["ETH"]["decimals"] == 18


def test_no_lot_is_available_without_nodes(api_client):
    # Given a fresh shop with no GPU node registered / When a client reads the catalog
    # Then nothing can be ordered
    assert catalog(api_client)["lots_available"] == 0


def test_lots_available_counts_sellable_nodes_only(api_client, make_node):
    # Given three working nodes, one in maintenance and one failed
    for _ in range(3):
        make_node()
    make_node(state="maintenance")
    make_node(state="failed")

    # When a client reads the catalog / Then only the three working nodes can be sold
    assert catalog(api_client)["lots_available"] == 3


def test_lots_held_by_an_order_are_no_longer_available(api_client, make_node, place_order):
    # Given four nodes, one of them in maintenance
    for _ in range(3):
        make_node()
    make_node(state="maintenance")

    # When an order for two lots is placed
    place_order(lots=2)

    # Then one lot is left
    assert catalog(api_client)["lots_available"] == 1


def test_the_openapi_schema_describes_the_orders_endpoint(api_client):
    # Given the API / When a client asks for its schema in JSON
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    # Then it is an OpenAPI 3 document that names the order endpoints
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/orders/" in schema["paths"]
    assert "post" in schema["paths"]["/api/v1/orders/"]
    assert "/api/v1/catalog/" in schema["paths"]


def test_the_schema_answers_in_its_default_format_too(api_client):
    # Given the API / When a client asks for the schema without choosing a format
    response = api_client.get("/api/schema/")

    # Then it answers 200 with an OpenAPI 3 document
    assert response.status_code == 200
    assert b"openapi: 3." in response.content
    assert b"/api/v1/orders/:" in response.content

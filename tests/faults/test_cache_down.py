"""The shared cache (CACHE_URL, Redis) stopped or hung: pages, the catalog API and order placement keep working.

The catalog, the page fragments and the rate-limit counters live in that cache; a private redis-server stands
in for it here and is stopped and frozen (never the shared one).
"""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def cache_on_private_redis(settings, private_redis):
    settings.CACHES = {
        "default": {
            "BACKEND": "core.cache.ForgivingRedisCache",
            "LOCATION": private_redis.url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    settings.RATELIMIT_ENABLE = True  # the counters are read and written on every order
    return private_redis


def shop_answers(client: Client, order_payload: dict) -> tuple[int, int, int, float]:
    started = time.monotonic()
    home = client.get("/").status_code
    catalog = client.get("/api/v1/catalog/").status_code
    order = client.post("/api/v1/orders/", order_payload, content_type="application/json").status_code
    return home, catalog, order, time.monotonic() - started


def test_with_the_cache_stopped_pages_the_catalog_and_orders_still_work_and_the_cache_is_used_again_after(
    cache_on_private_redis, anvil, make_node, order_payload
):
    redis_server = cache_on_private_redis
    for _ in range(3):
        make_node()
    client = Client()
    # Given a shop whose cache works (a first round fills it)
    assert shop_answers(client, order_payload)[:3] == (200, 200, 201)
    assert cache.get("shop:catalog:v1") is not None

    # When the cache's Redis stops
    redis_server.stop()
    home, catalog, order, seconds = shop_answers(client, order_payload)

    # Then the customer sees nothing of it: the pages and the API answer from the database, the order is placed
    assert (home, catalog, order) == (200, 200, 201)
    assert seconds < 5

    # And once Redis is back, the cache is filled and read again
    redis_server.start()
    assert shop_answers(client, order_payload)[:3] == (200, 200, 201)
    assert cache.get("shop:catalog:v1") is not None


def test_with_the_cache_hung_requests_answer_within_its_short_timeouts(cache_on_private_redis, anvil, make_node):
    make_node()
    client = Client()
    assert client.get("/").status_code == 200

    # When the cache's host accepts connections but never answers
    cache_on_private_redis.freeze()
    started = time.monotonic()
    home = client.get("/").status_code
    catalog = client.get("/api/v1/catalog/").status_code
    seconds = time.monotonic() - started

    # Then the pages answer anyway, each cache call giving up after half a second
    assert (home, catalog) == (200, 200)
    assert seconds < 10


def test_a_hung_cache_costs_one_timeout_then_is_left_alone_for_a_few_seconds(cache_on_private_redis, anvil, make_node):
    # Given a cache that hangs, and a first page that met its timeout
    make_node()
    client = Client()
    assert client.get("/").status_code == 200
    cache_on_private_redis.freeze()
    assert client.get("/").status_code == 200

    # When more pages are asked for at once
    started = time.monotonic()
    statuses = [client.get(path).status_code for path in ("/", "/order/", "/api/v1/catalog/")]
    seconds = time.monotonic() - started

    # Then they answer without waiting on the cache again (each call would cost half a second)
    assert statuses == [200, 200, 200]
    assert seconds < 0.5 * 2
    cache_on_private_redis.thaw()


def test_with_the_cache_stopped_every_cache_call_answers_as_an_empty_cache(cache_on_private_redis):
    # Given a cache whose Redis is stopped
    cache_on_private_redis.stop()

    # Then each call answers what an empty cache would, never an error
    assert cache.get_many(["shop:a", "shop:b"]) == {}
    assert cache.get("shop:a", "fallback") == "fallback"
    assert cache.add("shop:a", 1) is False
    assert cache.set_many({"shop:a": 1, "shop:b": 2}) == ["shop:a", "shop:b"]
    assert cache.delete("shop:a") is False

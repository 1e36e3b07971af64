"""Every error answer of the API carries a stable `code` and the request's `request_id`, and every answer the
`X-Request-ID` header (the client's own when it is sane); a total the customer expected that is no longer the
price is refused (409 `price_changed`) with the price of now and nothing stored (issue 43, item 6)."""

from __future__ import annotations

import json
import logging
from decimal import Decimal

import pytest

from core.log_context import ContextFilter
from orders.models import Duration, Order, Reservation
from payments.models import PaymentRequest
from tests.placing import ORDERS_URL, order_post

pytestmark = pytest.mark.django_db

HEX_ID = r"^[0-9a-f]{32}$"


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "status", "code"),
    [
        ("post", ORDERS_URL, "{", "application/json", 400, "parse_error"),
        ("post", ORDERS_URL, "{}", "application/json", 400, "invalid"),
        ("post", ORDERS_URL, "lots=1", "text/plain", 415, "unsupported_media_type"),
        ("post", ORDERS_URL, json.dumps({"x": "y" * 3_000_000}), "application/json", 413, "too_large"),
        ("get", f"{ORDERS_URL}B2-NONE-NONE/", None, None, 404, "not_found"),
        ("delete", ORDERS_URL, None, None, 405, "method_not_allowed"),
        ("post", "/api/v1/nodes/no-such-node/recheck/", "{}", "application/json", 403, "not_authenticated"),
    ],
)
def test_every_error_answer_has_a_code_and_the_request_id(client, method, path, body, content_type, status, code):
    extra = {"data": body, "content_type": content_type} if body is not None else {}
    response = getattr(client, method)(path, **extra)

    assert response.status_code == status
    answer = response.json()
    assert (answer["code"], answer["request_id"]) == (code, response["X-Request-ID"])
    # the length announced is the body's, grown by the two marks (a client reading it would stop short)
    assert response["Content-Length"] == str(len(response.content))


def test_bad_fields_keep_their_lists_beside_the_code(client):
    answer = order_post(client, {"lots": 0}).json()
    assert answer["code"] == "invalid"
    assert isinstance(answer["lots"], list) and isinstance(answer["email"], list)


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("3f2a6c1e-8c4b-4b7e-9d1a-0c5e7f9b2d44", True),
        ("req:edge-01.abc_123", True),
        ("short", False),  # under 8 characters: not an id
        ("x" * 129, False),
        ("id with spaces", False),
        ("abc12345\r\nSet-Cookie: a=b", False),
        ("ıd-lookalike-123", False),  # not ASCII
    ],
)
def test_the_clients_request_id_is_kept_only_when_sane(client, sent, kept):
    response = client.get("/", headers={"X-Request-ID": sent})
    assert response.status_code == 200
    if kept:
        assert response["X-Request-ID"] == sent
    else:
        assert response["X-Request-ID"] != sent
        assert len(response["X-Request-ID"]) == 32 and int(response["X-Request-ID"], 16) >= 0


def test_each_request_gets_its_own_id(client):
    assert client.get("/")["X-Request-ID"] != client.get("/")["X-Request-ID"]


@pytest.fixture
def context_logged(caplog):
    """caplog with the handler's filter that copies the log context (request_id...) onto each record."""
    caplog.handler.addFilter(ContextFilter())
    caplog.set_level(logging.INFO)
    yield caplog
    caplog.handler.removeFilter(caplog.handler.filters[-1])


def test_the_log_lines_of_a_request_carry_its_id(make_node, place_order, context_logged):
    make_node()
    placed = place_order(headers={"X-Request-ID": "trace-4242-abcd"})

    [line] = [r for r in context_logged.records if r.getMessage().startswith(f"order {placed['reference']} placed")]
    assert line.request_id == "trace-4242-abcd"


def test_the_expected_total_places_the_order_when_it_is_the_price(make_node, place_order, order_payload):
    make_node()
    week = Duration.objects.get(days=order_payload["duration_days"])

    placed = place_order(expected_total_usd=f"{week.price_per_lot_usd:.2f}")

    assert Decimal(placed["total_usd"]) == week.price_per_lot_usd


def test_an_order_whose_price_moved_since_the_customer_saw_it_is_refused_with_the_price_of_now(
    make_node, api_client, place_order, order_payload
):
    # Given a 7-day price raised after the customer read it
    make_node()
    week = Duration.objects.get(days=order_payload["duration_days"])
    seen = week.price_per_lot_usd
    Duration.objects.filter(pk=week.pk).update(price_per_lot_usd=seen + 50)

    # When the script places the order with the total it saw
    response = order_post(api_client, {**order_payload, "expected_total_usd": f"{seen:.2f}"})

    # Then it is refused with the price of now, and nothing is stored or held
    assert response.status_code == 409
    answer = response.json()
    assert (answer["code"], answer["total_usd"]) == ("price_changed", f"{seen + 50:.2f}")
    assert answer["request_id"] == response["X-Request-ID"]
    assert (Order.objects.count(), Reservation.objects.count(), PaymentRequest.objects.count()) == (0, 0, 0)


@pytest.mark.parametrize("bad", ["-1", "abc", "1.234", "1e400"])
def test_an_expected_total_that_is_not_an_amount_is_refused_on_its_field(api_client, order_payload, bad):
    response = order_post(api_client, {**order_payload, "expected_total_usd": bad})
    assert response.status_code == 400
    assert "expected_total_usd" in response.json()


@pytest.mark.parametrize(
    ("language", "words"),
    [("es", "Ahora el precio es 999.00 USD"), ("fr", "Le prix est maintenant de 999.00 USD")],
)
def test_the_price_changed_answer_speaks_the_customers_language(make_node, api_client, order_payload, language, words):
    make_node()
    Duration.objects.filter(days=order_payload["duration_days"]).update(price_per_lot_usd=Decimal("999.00"))

    response = order_post(api_client, {**order_payload, "expected_total_usd": "1.00"}, HTTP_ACCEPT_LANGUAGE=language)

    assert response.status_code == 409
    assert response.json()["detail"].startswith(words)

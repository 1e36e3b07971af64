"""Checkout against a real chain: the quote reads the chain's height (unless it was read seconds ago), RPC failover,
and one fresh address per order."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.cache import cache

from orders.models import Order, Reservation
from orders.orders import OrderInputError
from payments.addresses import derive_address, key_fingerprint
from payments.checkout import quote_prepare
from payments.models import AddressCursor, PaymentRequest
from shop.placement import order_create
from tests.api_answers import error_fields

ORDERS_URL = "/api/v1/orders/"


def stored_counts() -> dict[str, int]:
    return {
        "orders": Order.objects.count(),
        "reservations": Reservation.objects.count(),
        "payments": PaymentRequest.objects.count(),
        "cursors": AddressCursor.objects.count(),
        "next_index": sum(AddressCursor.objects.values_list("next_index", flat=True)),
    }


def test_a_quote_starts_watching_at_the_chains_current_height(anvil, local_eth):
    anvil.mine(3)
    height = anvil.block_number()

    quote = quote_prepare(asset=local_eth, amount_usd=Decimal("1990.00"))

    assert quote.start_block == height
    assert quote.amount_base_units == 663_334 * 10**12  # 1990 USD at the local 3000 USD/ETH, six digits up
    anvil.mine(2)
    cache.clear()  # seconds later: that reading has aged out (reuse within seconds: tests/payments/test_start_block.py)
    assert quote_prepare(asset=local_eth, amount_usd=Decimal("1990.00")).start_block == height + 2


def test_an_order_on_a_network_that_does_not_answer_is_refused_and_stores_nothing(
    anvil, monkeypatch, client, make_node, order_payload, closed_rpc_url
):
    make_node()
    first = client.post(ORDERS_URL, order_payload, content_type="application/json")  # the cursor exists from now on
    assert first.status_code == 201, first.content
    before = stored_counts()
    make_node()
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", closed_rpc_url)

    response = client.post(ORDERS_URL, order_payload, content_type="application/json")

    assert response.status_code == 400, response.content
    assert list(error_fields(response, "invalid")) == ["asset"]
    assert "Local development chain is not answering" in response.json()["asset"][0]
    assert stored_counts() == before


def test_the_next_rpc_url_is_used_when_the_first_does_not_answer(
    anvil, monkeypatch, client, make_node, order_payload, closed_rpc_url
):
    make_node()
    anvil.mine(1)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{closed_rpc_url},{anvil.url}")

    response = client.post(ORDERS_URL, order_payload, content_type="application/json")

    assert response.status_code == 201, response.content
    payment = PaymentRequest.objects.get(order__reference=response.json()["reference"])
    assert payment.start_block == anvil.block_number()


def test_each_order_gets_the_next_derivation_index_and_its_own_address(anvil, client, make_node, order_payload):
    for _ in range(4):
        make_node()

    bodies = []
    for _ in range(4):
        response = client.post(ORDERS_URL, order_payload, content_type="application/json")
        assert response.status_code == 201, response.content
        bodies.append(response.json())

    payments = [PaymentRequest.objects.get(order__reference=body["reference"]) for body in bodies]
    indexes = [payment.derivation_index for payment in payments]
    assert indexes == list(range(indexes[0], indexes[0] + 4))
    assert len({body["payment"]["address"] for body in bodies}) == 4
    for body, payment in zip(bodies, payments, strict=True):
        assert payment.key_fingerprint == key_fingerprint()
        assert body["payment"]["address"] == payment.address == derive_address(payment.derivation_index)
    assert AddressCursor.objects.get(key_fingerprint=key_fingerprint()).next_index == indexes[-1] + 1


def test_a_sold_out_order_does_not_use_up_a_derivation_index(anvil, make_node, order_request):
    make_node()
    first_request, late_request = order_request(), order_request()  # both saw one free lot
    first = order_create(request=first_request).order
    cursor_after_first = AddressCursor.objects.get(key_fingerprint=key_fingerprint()).next_index
    before = stored_counts()

    with pytest.raises(OrderInputError) as refused:
        order_create(request=late_request)

    assert refused.value.field == "lots"
    assert refused.value.message == "Sold out: no lot is available right now."
    assert stored_counts() == before
    make_node()
    second = order_create(request=order_request()).order
    assert second.payment.derivation_index == first.payment.derivation_index + 1 == cursor_after_first

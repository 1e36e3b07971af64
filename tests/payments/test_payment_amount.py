"""The amount to send reads the same, in plain digits, in the API, on the payment request and in the email."""

from __future__ import annotations

import pytest
from django.core import mail

from payments.models import PaymentRequest

ORDERS_URL = "/api/v1/orders/"


@pytest.mark.parametrize(("duration_days", "amount"), [(7, "1990"), (30, "7900"), (3, "899")])
def test_a_stablecoin_order_asks_for_the_same_plain_amount_everywhere(
    anvil, client, make_node, order_payload, local_usdc, django_capture_on_commit_callbacks, duration_days, amount
):
    make_node()
    payload = {**order_payload, "asset": "USDC", "duration_days": duration_days}

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(ORDERS_URL, payload, content_type="application/json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["payment"]["amount"] == amount
    assert body["payment"]["amount_base_units"] == amount + "000000"
    payment = PaymentRequest.objects.get(order__reference=body["reference"])
    assert str(payment.amount) == amount
    (email,) = mail.outbox
    assert f"Send exactly {amount} USDC" in email.body
    assert f"Send exactly {amount} USDC" in email.alternatives[0].content


def test_a_native_coin_order_asks_for_the_same_wallet_friendly_amount_everywhere(
    anvil, client, make_node, order_payload, django_capture_on_commit_callbacks
):
    make_node()

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(ORDERS_URL, order_payload, content_type="application/json")

    assert response.status_code == 201, response.content
    body = response.json()
    # 1990 USD at the local 3000 USD/ETH (0.66333...) rounded up to six significant digits
    assert body["payment"]["amount"] == "0.663334"
    assert body["payment"]["amount_base_units"] == "663334000000000000"
    assert body["payment"]["uri"].endswith("?value=663334000000000000")
    assert str(PaymentRequest.objects.get(order__reference=body["reference"]).amount) == "0.663334"
    (email,) = mail.outbox
    assert "Send exactly 0.663334 ETH" in email.body


@pytest.mark.parametrize(("asset", "duration_days"), [("ETH", 7), ("ETH", 3), ("USDC", 30)])
def test_reading_an_order_back_gives_exactly_the_amount_quoted_when_it_was_placed(
    anvil, client, make_node, order_payload, local_usdc, asset, duration_days
):
    make_node()
    placed = client.post(
        ORDERS_URL, {**order_payload, "asset": asset, "duration_days": duration_days}, content_type="application/json"
    ).json()

    read = client.get(f"{ORDERS_URL}{placed['reference']}/", headers={"X-Order-Token": placed["access_token"]})

    assert read.status_code == 200
    for field in ("amount", "amount_base_units", "uri", "address"):
        assert read.json()["payment"][field] == placed["payment"][field], field
    stored = PaymentRequest.objects.get(order__reference=placed["reference"])
    assert str(int(stored.amount_base_units)) == placed["payment"]["amount_base_units"]

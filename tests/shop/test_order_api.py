"""POST /api/v1/orders/ and GET /api/v1/orders/<reference>/: placing an order, reading it back, refusals."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from urllib.parse import urlsplit

import pytest
from Crypto.Hash import keccak
from django.conf import settings
from django.core import mail
from django.utils import timezone

from orders.models import Order
from payments.models import Asset, Network, PaymentRequest
from tests.api_answers import error_fields
from tests.shop.helpers import ORDERS_URL, stored_counts

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]

PRICE_7_DAYS = Decimal("1990.00")
LOCAL_USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
CONTRACT_FIELDS = {
    "reference",
    "access_token",
    "status_url",
    "status",
    "lots",
    "total_gpus",
    "duration_days",
    "total_usd",
    "payment",
    "access",
    "manifest_url",
}
PAYMENT_FIELDS = {
    "network",
    "chain_id",
    "asset",
    "contract",
    "address",
    "amount",
    "amount_base_units",
    "expires_at",
    "uri",
    "status",
    "received_base_units",
    "confirmations",
    "tx_hashes",
}


def eip55(address: str) -> str:
    """The EIP-55 mixed-case checksum of an address, computed here from keccak-256."""
    hexdigits = address[2:].lower()
    digest = keccak.new(digest_bits=256, data=hexdigits.encode()).hexdigest()
    return "0x" + "".join(c.upper() if int(digest[i], 16) >= 8 else c for i, c in enumerate(hexdigits))


def read_order(api_client, reference: str, token: str | None):
    headers = {"X-Order-Token": token} if token is not None else {}
    return api_client.get(f"{ORDERS_URL}{reference}/", headers=headers)


def when(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@pytest.mark.parametrize("lots", [1, 3])
def test_placing_an_order_answers_201_with_every_field_of_the_contract(make_node, place_order, lots):
    # Given six free lots (an unpaid order may hold half of them)
    for _ in range(6):
        make_node()
    before = timezone.now()

    # When a client orders `lots` lots for 7 days, paid in ETH on the local chain
    body = place_order(lots=lots, duration_days=7)
    after = timezone.now()

    # Then the order is awaiting payment, with its own secret link
    assert set(body) >= CONTRACT_FIELDS
    assert re.fullmatch(r"B2-[2-9A-HJ-NP-Z]{4}-[2-9A-HJ-NP-Z]{4}", body["reference"])
    assert len(body["access_token"]) >= 32
    status_url = urlsplit(body["status_url"])
    assert status_url.scheme in ("http", "https")
    assert status_url.path == f"/o/{body['reference']}/{body['access_token']}/"
    assert body["status"] == "awaiting_payment"
    # And it is what was asked for: two cards per lot, the price times the lots
    assert body["lots"] == lots
    assert body["total_gpus"] == 2 * lots
    assert body["duration_days"] == 7
    assert Decimal(body["total_usd"]) == PRICE_7_DAYS * lots
    # And no access yet
    assert body["access"] is None
    assert body["manifest_url"] is None
    # And the payment: ether on the local chain to a checksummed address, nothing received yet
    payment = body["payment"]
    assert set(payment) >= PAYMENT_FIELDS
    assert payment["network"] == "local"
    assert payment["chain_id"] == 31337
    assert payment["asset"] == "ETH"
    assert payment["contract"] is None
    assert re.fullmatch(r"0x[0-9a-fA-F]{40}", payment["address"])
    assert payment["address"] == eip55(payment["address"])
    assert payment["status"] == "pending"
    assert payment["received_base_units"] == "0"
    assert payment["confirmations"] == 0
    assert payment["tx_hashes"] == []
    # And the quote holds for 30 minutes
    expires_at = when(payment["expires_at"])
    assert before + dt.timedelta(minutes=30) <= expires_at <= after + dt.timedelta(minutes=30)


def test_the_amount_is_wallet_friendly_and_covers_the_price(make_node, place_order):
    # Given a free lot, and the local chain's ether priced at the development rate
    make_node()
    rate = Decimal(settings.DEV_NATIVE_USD_RATE)

    # When an order for one lot, 7 days, is placed in ETH
    payment = place_order(lots=1, duration_days=7)["payment"]

    # Then the decimal amount is the base units over 10**18, exactly
    assert re.fullmatch(r"[0-9]+", payment["amount_base_units"])
    units = int(payment["amount_base_units"])
    assert Decimal(payment["amount"]) == Decimal(units).scaleb(-18)
    # And it is the price rounded up to six significant digits: never short, at most one step of the sixth over
    exact = PRICE_7_DAYS / rate
    assert Decimal(units).scaleb(-18) >= exact
    assert Decimal(units).scaleb(-18) - exact < Decimal(1).scaleb(exact.adjusted() - 5)
    assert len(str(units).rstrip("0")) <= 6
    # And the EIP-681 link carries the address, the chain and the amount in wei
    assert payment["uri"] == f"ethereum:{payment['address']}@31337?value={units}"


def test_an_order_read_with_its_token_has_the_same_shape(api_client, make_node, place_order):
    # Given a placed order
    make_node()
    placed = place_order()

    # When it is read back with its token
    response = read_order(api_client, placed["reference"], placed["access_token"])

    # Then the body is the one given at placement
    assert response.status_code == 200
    assert response.json() == placed


def test_the_reference_is_not_case_sensitive_when_reading_an_order(api_client, make_node, place_order):
    # Given a placed order
    make_node()
    placed = place_order()

    # When it is read with the reference typed in lower case / Then it is found
    assert read_order(api_client, placed["reference"].lower(), placed["access_token"]).status_code == 200


def test_a_wrong_token_a_missing_token_and_an_unknown_reference_all_look_the_same(api_client, make_node, place_order):
    # Given two placed orders
    make_node()
    make_node()
    placed = place_order()
    other = place_order(email="grace@example.org")

    # When the order is read with a wrong token, with another order's token, without a token,
    # and an unknown reference is read with a valid-looking token
    answers = [
        read_order(api_client, placed["reference"], "0" * 64),
        read_order(api_client, placed["reference"], other["access_token"]),
        read_order(api_client, placed["reference"], None),
        read_order(api_client, placed["reference"], ""),
        read_order(api_client, "B2-ZZZZ-ZZZZ", placed["access_token"]),
    ]

    # Then each is a 404 with the same body (but for its own request_id): nothing tells that the order exists
    assert [answer.status_code for answer in answers] == [404] * len(answers)
    assert len({str(error_fields(answer, "not_found")) for answer in answers}) == 1
    assert len({answer.content.replace(answer["X-Request-ID"].encode(), b"") for answer in answers}) == 1


def test_the_amount_read_back_is_the_amount_quoted_to_the_wei(api_client, make_node, place_order, settings):
    # Given an order in ether (0.663334 ETH: 1990 USD at the development rate, rounded up to six digits)
    make_node()
    placed = place_order(lots=1, duration_days=7)
    assert placed["payment"]["amount_base_units"] == "663334000000000000"

    # When it is read back later, after the rate moved
    settings.DEV_NATIVE_USD_RATE = "2999.5"
    payment = read_order(api_client, placed["reference"], placed["access_token"]).json()["payment"]

    # Then the customer is asked for the very amount quoted at placement, not a rounded one
    assert payment["amount_base_units"] == placed["payment"]["amount_base_units"]
    assert payment["amount"] == placed["payment"]["amount"]
    assert payment["uri"] == placed["payment"]["uri"]


def test_two_orders_get_two_different_deposit_addresses(make_node, place_order):
    # Given two free lots
    make_node()
    make_node()

    # When two orders are placed
    first = place_order()["payment"]["address"]
    second = place_order(email="grace@example.org")["payment"]["address"]

    # Then each has its own checksummed deposit address
    assert first != second
    assert {first, second} == {eip55(first), eip55(second)}


def test_payments_are_watched_from_the_chain_height_at_placement(anvil, make_node, place_order):
    # Given a chain that has moved on a few blocks
    make_node()
    anvil.mine(5)
    height = anvil.block_number()

    # When an order is placed
    reference = place_order()["reference"]

    # Then only transfers from that block on count for its payment
    assert PaymentRequest.objects.get(order__reference=reference).start_block == height


PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
BAD_INPUT = [
    pytest.param({"lots": -1}, "lots", "greater than or equal to 1", id="negative-lots"),
    pytest.param({"lots": 0}, "lots", "greater than or equal to 1", id="zero-lots"),
    pytest.param({"lots": 10**30}, "lots", "less than or equal to 64", id="huge-lots"),
    pytest.param({"lots": "two"}, "lots", "valid integer", id="lots-not-a-number"),
    pytest.param({"duration_days": 5}, "duration_days", "3, 7, 30", id="unknown-duration"),
    pytest.param({"preparation": "tensorflow-1"}, "preparation", "listed preparations", id="unknown-preparation"),
    pytest.param({"ssh_public_key": PRIVATE_KEY}, "ssh_public_key", "private key", id="private-key-pasted"),
    pytest.param({"ssh_public_key": "ssh-ed25519 notakey"}, "ssh_public_key", "base64", id="garbage-key"),
    pytest.param({"email": "ada@"}, "email", "valid email", id="invalid-email"),
    pytest.param({"network": "solana"}, "network", "not offered", id="unknown-network"),
    pytest.param({"asset": "USDC"}, "asset", "USDC is not accepted on", id="asset-not-on-network"),
    pytest.param({"hypothesis_kind": "world_peace"}, "hypothesis_kind", "valid choice", id="unknown-hypothesis"),
]


@pytest.mark.parametrize(("change", "field", "message"), BAD_INPUT)
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_stored(
    anvil, api_client, make_node, order_payload, change, field, message
):
    # Given free lots
    make_node()
    make_node()
    before = stored_counts()

    # When an order is posted with one bad field
    response = api_client.post(ORDERS_URL, {**order_payload, **change}, format="json")

    # Then the answer is a 400 with a message on that field alone
    assert response.status_code == 400
    errors = error_fields(response, "invalid")
    assert list(errors) == [field]
    assert message in " ".join(errors[field])
    # And nothing is stored or reserved, and no address is used up
    assert stored_counts() == before
    assert mail.outbox == []


@pytest.mark.parametrize(
    "field",
    ["lots", "duration_days", "preparation", "first_name", "last_name", "email", "ssh_public_key", "network", "asset"],
)
def test_a_missing_field_is_a_400_saying_it_is_required(anvil, api_client, make_node, order_payload, field):
    # Given a free lot
    make_node()
    before = stored_counts()

    # When an order is posted without one required field
    payload = {key: value for key, value in order_payload.items() if key != field}
    response = api_client.post(ORDERS_URL, payload, format="json")

    # Then the 400 says that field is required, and nothing is stored
    assert response.status_code == 400
    assert error_fields(response, "invalid") == {field: ["This field is required."]}
    assert stored_counts() == before


def test_every_bad_field_is_reported_in_the_same_answer(anvil, api_client, make_node, order_payload):
    # Given a free lot
    make_node()
    before = stored_counts()

    # When an order is posted with several bad fields
    payload = {**order_payload, "lots": 0, "duration_days": 5, "email": "nope", "network": "solana"}
    payload.pop("first_name")
    response = api_client.post(ORDERS_URL, payload, format="json")

    # Then all of them are named at once
    assert response.status_code == 400
    assert set(error_fields(response, "invalid")) == {"lots", "duration_days", "email", "network", "first_name"}
    assert stored_counts() == before


def test_an_empty_body_is_a_400_not_a_crash(anvil, api_client, make_node):
    # Given a free lot / When an empty JSON object is posted
    make_node()
    response = api_client.post(ORDERS_URL, {}, format="json")

    # Then every required field is reported
    assert response.status_code == 400
    assert {"lots", "duration_days", "preparation", "email", "ssh_public_key", "network", "asset"} <= set(
        error_fields(response, "invalid")
    )


def test_more_lots_than_available_is_a_400_saying_how_many_are_left(anvil, api_client, make_node, order_payload):
    # Given two free lots
    make_node()
    make_node()
    before = stored_counts()

    # When three are ordered
    response = api_client.post(ORDERS_URL, {**order_payload, "lots": 3}, format="json")

    # Then the answer says only two are available, and nothing is held
    assert response.status_code == 400
    assert error_fields(response, "invalid") == {"lots": ["Only 2 lots are available right now."]}
    assert stored_counts() == before


def test_ordering_when_sold_out_says_so(anvil, api_client, make_node, order_payload):
    # Given the only node is in maintenance
    make_node(state="maintenance")

    # When one lot is ordered
    response = api_client.post(ORDERS_URL, order_payload, format="json")

    # Then the shop is sold out
    assert response.status_code == 400
    assert error_fields(response, "invalid") == {"lots": ["Sold out: no lot is available right now."]}
    assert Order.objects.count() == 0


def test_the_order_received_email_carries_the_secret_link_and_the_reference(
    make_node, place_order, django_capture_on_commit_callbacks
):
    # Given a free lot
    make_node()

    # When an order is placed (and its transaction commits)
    with django_capture_on_commit_callbacks(execute=True):
        body = place_order()

    # Then the customer receives one email with the reference and the secret status link
    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    assert email.to == ["ada@example.org"]
    link = settings.SITE_URL + urlsplit(body["status_url"]).path
    assert body["reference"] in email.subject + email.body
    assert link in email.body
    html = email.alternatives[0][0] if email.alternatives else ""
    assert link in html
    assert Order.objects.get(reference=body["reference"]).language == "en"
    # And it asks for the amount, to the address, that the API quoted
    payment = body["payment"]
    assert f"Send exactly {payment['amount']} ETH on Local development chain" in email.body
    assert payment["address"] in email.body


def test_the_email_for_a_stablecoin_order_states_the_amount_in_plain_digits(
    make_node, place_order, django_capture_on_commit_callbacks
):
    # Given a test USDC registered on the local chain (as `devnet setup` does) and a free lot
    local = Network.objects.get(slug="local")
    Asset.objects.create(
        network=local, symbol="USDC", name="USD Coin (test)", decimals=6, contract=LOCAL_USDC, usd_stable=True
    )
    make_node()

    # When one lot for 7 days (1,990 USD) is ordered in USDC
    with django_capture_on_commit_callbacks(execute=True):
        body = place_order(asset="USDC")

    # Then the API and the email both ask for exactly 1990 USDC, written as a person writes it
    assert body["payment"]["amount"] == "1990"
    assert body["payment"]["amount_base_units"] == "1990000000"
    assert body["payment"]["contract"] == LOCAL_USDC
    email = mail.outbox[0]
    assert "Send exactly 1990 USDC on Local development chain" in email.body
    assert LOCAL_USDC in email.body


def test_the_order_received_email_is_in_spanish_for_a_spanish_request(
    make_node, place_order, django_capture_on_commit_callbacks
):
    # Given a free lot
    make_node()

    # When an order is placed by a browser that prefers Spanish
    with django_capture_on_commit_callbacks(execute=True):
        body = place_order(headers={"Accept-Language": "es"})

    # Then the order remembers Spanish, and the email is written in Spanish
    assert Order.objects.get(reference=body["reference"]).language == "es"
    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    reference = body["reference"]
    assert email.subject == f"Pedido {reference} recibido: pague en los próximos 30 minutos"
    assert "Hola, Ada:" in email.body
    assert f"Gracias por su pedido {reference}. Sus lotes quedan reservados mientras realiza el pago." in email.body
    assert urlsplit(body["status_url"]).path in email.body

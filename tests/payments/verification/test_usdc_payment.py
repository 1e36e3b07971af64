"""A USDC payment from the customer's own wallet: "I have paid" with the tx hash, detection, confirmation."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from payments.models import Credit, Notice
from tests.api_answers import error_fields
from tests.payments.verification.chain import call_data
from tests.payments.verification.helpers import order_of, order_steps, payment_of, payment_steps, units

# Every RPC read goes through a provider with tight limits (small log ranges and batches, 429s): issue 26.
pytestmark = pytest.mark.usefixtures("tight_provider")

INVALID_HASH_MESSAGE = "A transaction hash is 0x followed by 64 hexadecimal characters; check what you pasted."


def test_a_usdc_transfer_named_in_i_have_paid_is_detected_then_confirmed_and_the_order_is_paid(
    chain, customer, scan_pass, mailoutbox
):
    # Given an order for 1 lot in USDC on the local chain (2 confirmations required)
    placed = customer.order()
    payment = placed["payment"]
    assert (payment["asset"], payment["chain_id"], payment["contract"]) == ("USDC", 31337, chain.usdc)
    mailoutbox.clear()  # the "order received" email

    # When the customer's wallet sends exactly the quoted amount and they press "I have paid" with the hash
    sent = chain.wallet.pay_token(chain.usdc, payment["address"], units(placed))
    response = customer.paid(placed, sent.tx_hash)

    # Then the request is accepted, and the transfer is detected at 1 of 2 confirmations
    assert response.status_code == 202, response.content
    assert response.json()["reference"] == placed["reference"]
    seen = customer.read(placed)
    assert seen["status"] == "payment_reported"
    assert seen["payment"]["status"] == "detected"
    assert seen["payment"]["confirmations"] == 1
    assert seen["payment"]["confirmations_required"] == 2
    assert seen["payment"]["received_base_units"] == str(units(placed))
    assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()]
    assert [m.subject for m in mailoutbox] == [f"Order {placed['reference']}: your transfer is on its way"]
    assert (
        Notice.objects.get(payment=payment_of(placed)).result
        == f"found on Local development chain in block {sent.block_number}"
    )

    # When one more block is mined and the verifier makes a pass
    chain.mine(1)
    scan_pass()

    # Then the payment is confirmed and the order paid
    seen = customer.read(placed)
    assert seen["status"] == "paid"
    assert seen["payment"]["status"] == "confirmed"
    assert seen["payment"]["confirmations"] == 2
    assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()]
    # And the customer was told at each step, with the order's secret link
    assert [m.subject for m in mailoutbox] == [
        f"Order {placed['reference']}: your transfer is on its way",
        f"Order {placed['reference']}: payment confirmed",
    ]
    assert all(m.to == ["ada@example.org"] for m in mailoutbox)
    assert urlsplit(placed["status_url"]).path in mailoutbox[-1].body
    # And every step is recorded, on the order and on the payment
    assert order_steps(placed) == [
        ("", "awaiting_payment", "customer"),
        ("awaiting_payment", "payment_reported", "customer"),
        ("payment_reported", "paid", "system"),
    ]
    assert sent.tx_hash.lower() in order_of(placed).events.all()[1].reason
    assert payment_steps(placed) == [("pending", "detected"), ("detected", "confirmed")]
    credit = Credit.objects.get(payment=payment_of(placed))
    assert (credit.block_number, credit.sender, credit.final) == (sent.block_number, chain.wallet.address.lower(), True)


def test_pressing_i_have_paid_again_is_harmless(chain, customer, scan_pass, mailoutbox):
    # Given an order paid in USDC, detected through "I have paid" and confirmed by a pass
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    customer.paid(placed, sent.tx_hash)
    chain.mine(1)
    scan_pass()
    emails = len(mailoutbox)

    # When the customer presses "I have paid" twice more, with and without the hash
    again = customer.paid(placed, sent.tx_hash)
    without_hash = customer.paid(placed)

    # Then both are accepted, the transfer is counted once, and nothing moves or is sent again
    assert (again.status_code, without_hash.status_code) == (202, 202)
    assert again.json()["status"] == "paid"
    assert Credit.objects.filter(payment=payment_of(placed)).count() == 1
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(units(placed))
    assert len(order_steps(placed)) == 3
    assert len(payment_steps(placed)) == 2
    assert len(mailoutbox) == emails
    assert Notice.objects.filter(payment=payment_of(placed)).count() == 3


def test_a_malformed_tx_hash_is_refused_with_a_message_on_the_field(chain, customer):
    # Given an order awaiting payment
    placed = customer.order()

    # When "I have paid" names something that is not a transaction hash
    response = customer.paid(placed, "0x1234-not-a-hash")

    # Then the API answers 400 with a message on tx_hash, and nothing is recorded
    assert response.status_code == 400
    assert error_fields(response, "invalid") == {"tx_hash": [INVALID_HASH_MESSAGE]}
    assert not Notice.objects.filter(payment=payment_of(placed)).exists()
    assert order_of(placed).status == "awaiting_payment"


def test_the_i_have_paid_form_shows_the_error_for_a_bad_hash_on_the_page(chain, customer, client):
    # Given an order's secret page
    placed = customer.order()
    page = urlsplit(placed["status_url"]).path

    # When the form is sent with a hash one character short
    response = client.post(page + "paid/", {"tx_hash": "0x" + "ab" * 31 + "c"})

    # Then the page comes back with the error next to the field, and nothing is recorded
    assert response.status_code == 400
    assert INVALID_HASH_MESSAGE in response.content.decode()
    assert placed["reference"] in response.content.decode()
    assert not Notice.objects.filter(payment=payment_of(placed)).exists()
    assert order_of(placed).status == "awaiting_payment"


def test_the_i_have_paid_form_with_a_good_hash_detects_the_transfer(
    chain, customer, client, django_capture_on_commit_callbacks
):
    # Given an order paid in USDC from the customer's wallet
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    page = urlsplit(placed["status_url"]).path

    # When the form is sent with the transaction hash as the wallet shows it (upper-case hex)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(page + "paid/", {"tx_hash": "0x" + sent.tx_hash[2:].upper()})

    # Then the customer is sent back to the order's page, where the transfer shows as detected
    assert response.status_code == 302
    assert response["Location"] == page
    shown = client.get(page).content.decode()
    assert "Detected, waiting for confirmations" in shown
    assert payment_of(placed).status == "detected"


def test_i_have_paid_without_a_hash_looks_for_the_transfer_at_once(chain, customer):
    # Given an order paid in USDC, 2 confirmations deep
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)

    # When the customer presses "I have paid" without a hash
    response = customer.paid(placed)

    # Then the check it triggers finds the transfer on the order's network: the order is paid
    assert response.status_code == 202
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()]


def test_a_failed_transaction_named_in_i_have_paid_credits_nothing(chain, customer):
    # Given an order in USDC, and a transfer of tokens the wallet does not have: it reverts on the chain
    placed = customer.order()
    failed = chain.wallet.send(
        to=chain.usdc,
        data=call_data("transfer(address,uint256)", ["address", "uint256"], [placed["payment"]["address"], 10**15]),
        must_succeed=False,
    )

    # When the customer presses "I have paid" with its hash
    customer.paid(placed, failed.tx_hash)

    # Then nothing is credited, and the check says the transaction failed
    seen = customer.read(placed)
    assert (seen["payment"]["status"], seen["payment"]["received_base_units"]) == ("pending", "0")
    assert not Credit.objects.exists()
    assert Notice.objects.get().result == "failed transaction on Local development chain: it moved nothing"

"""A payment in the native coin (ETH) is found by the background scan alone, without any "I have paid"."""

from __future__ import annotations

import pytest

from payments.models import Credit, Notice
from tests.payments.verification.helpers import order_steps, payment_of, payment_steps, units

# Every RPC read goes through a provider with tight limits (issue 26): one that takes batches of 3, and one that
# refuses batches (the blocks and balances are then read one call at a time).
pytestmark = [
    pytest.mark.usefixtures("tight_provider"),
    pytest.mark.parametrize("tight_provider", [False, True], indirect=True, ids=["batches of 3", "no batches"]),
]


def test_an_eth_transfer_is_found_by_the_scan_without_any_notice_and_pays_the_order(
    chain, customer, scan_pass, mailoutbox
):
    # Given an order in ETH on the local chain, quoted in wei
    placed = customer.order(asset="ETH")
    assert placed["payment"]["contract"] is None
    wei = units(placed)
    assert wei > 10**17

    # When the customer's wallet sends the amount as a plain value transfer, and says nothing
    sent = chain.wallet.pay_native(placed["payment"]["address"], wei)
    chain.mine(1)
    scan_pass()

    # Then one pass finds it, final at 2 confirmations: the payment is confirmed and the order paid
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(wei)
    assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()]
    assert not Notice.objects.exists()
    credit = Credit.objects.get(payment=payment_of(placed))
    assert (credit.log_index, credit.block_number, credit.amount_base_units) == (-1, sent.block_number, wei)
    assert credit.sender == chain.wallet.address.lower()
    assert payment_steps(placed) == [("pending", "confirmed")]
    assert order_steps(placed)[-1] == ("awaiting_payment", "paid", "system")
    assert mailoutbox[-1].subject == f"Order {placed['reference']}: payment confirmed"


def test_an_eth_transfer_is_detected_first_and_confirmed_by_a_later_pass(chain, customer, scan_pass):
    # Given an order in ETH, paid by a value transfer in the latest block
    placed = customer.order(asset="ETH")
    chain.wallet.pay_native(placed["payment"]["address"], units(placed))

    # When the verifier passes at 1 confirmation, then again after one more block
    scan_pass()
    first = customer.read(placed)
    chain.mine(1)
    scan_pass()

    # Then it was detected first, then confirmed, and the order is paid
    assert (first["status"], first["payment"]["status"], first["payment"]["confirmations"]) == (
        "awaiting_payment",
        "detected",
        1,
    )
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"], seen["payment"]["confirmations"]) == ("paid", "confirmed", 2)
    assert payment_steps(placed) == [("pending", "detected"), ("detected", "confirmed")]


def test_eth_sent_through_a_contract_wallet_is_found_too(chain, customer, scan_pass):
    # Given an order in ETH, and a customer paying from a smart-contract wallet (or an exchange's batching
    # contract): the ETH reaches the deposit address by an internal transfer, with no log
    placed = customer.order(asset="ETH")
    forwarder = chain.wallet.deploy_forwarder()

    # When the wallet forwards exactly the quoted wei to the deposit address and it gets 2 confirmations
    sent = chain.wallet.pay_native_through(forwarder, placed["payment"]["address"], units(placed))
    balance = int(chain.node.call("eth_getBalance", [placed["payment"]["address"], "latest"]), 16)
    assert balance == units(placed)
    chain.mine(1)
    scan_pass()
    # And the customer also presses "I have paid" with the hash their wallet shows
    customer.paid(placed, sent.tx_hash)
    scan_pass()

    # Then the money on the address pays the order, as a transfer from any sender does
    seen = customer.read(placed)
    assert seen["payment"]["received_base_units"] == str(units(placed))
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")

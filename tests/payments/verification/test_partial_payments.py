"""Partial payments add up: a short transfer asks for a top-up, the top-up completes the order.
Only transfers from the order's start block on count."""

from __future__ import annotations

from payments.models import Credit, Network
from payments.scan import scan_network
from tests.payments.verification.helpers import order_steps, payment_of, payment_steps, units


def test_two_partial_usdc_transfers_add_up_to_a_paid_order(chain, customer, scan_pass, mailoutbox):
    # Given an order in USDC
    placed = customer.order()
    address, amount = placed["payment"]["address"], units(placed)
    mailoutbox.clear()

    # When 1,000 USDC arrive (less than the quote) and become final
    chain.wallet.pay_token(chain.usdc, address, 1_000_000_000)
    chain.mine(1)
    scan_pass()

    # Then the payment is underpaid, the order needs review, and the customer is told to top up
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "underpaid")
    assert seen["payment"]["received_base_units"] == "1000000000"
    missing = amount - 1_000_000_000
    assert [m.subject for m in mailoutbox] == [f"Order {placed['reference']}: your payment needs attention"]
    body = mailoutbox[0].body
    assert f"We received 1000 USDC, but {missing / 10**6:g} USDC are missing." in body
    assert "Send the missing amount to the same address on Local development chain" in body
    assert address in body

    # When the customer sends the missing amount to the same address
    top_up = chain.wallet.pay_token(chain.usdc, address, missing)
    chain.mine(1)
    scan_pass()

    # Then both transfers count: the payment is confirmed and the order paid
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(amount)
    assert len(seen["payment"]["tx_hashes"]) == 2
    assert top_up.tx_hash.lower() in seen["payment"]["tx_hashes"]
    assert payment_steps(placed) == [("pending", "underpaid"), ("underpaid", "confirmed")]
    assert order_steps(placed)[-2:] == [
        ("awaiting_payment", "needs_review", "system"),
        ("needs_review", "paid", "system"),
    ]
    assert mailoutbox[-1].subject == f"Order {placed['reference']}: payment confirmed"


def test_a_short_transfer_not_yet_final_shows_as_detected_not_underpaid(chain, customer, scan_pass, mailoutbox):
    # Given an order in USDC, and half of it in the latest block (1 of 2 confirmations)
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) // 2)
    mailoutbox.clear()

    # When the verifier passes
    scan_pass()

    # Then the transfer is seen but nobody is alarmed yet: detected, the order still awaits payment
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("awaiting_payment", "detected")
    assert seen["payment"]["received_base_units"] == str(units(placed) // 2)
    assert [m.subject for m in mailoutbox] == [f"Order {placed['reference']}: your transfer is on its way"]


def test_a_transfer_from_before_the_orders_start_block_does_not_count(chain, customer):
    # Given an order in USDC, and a full transfer to its address that lies before the order's start block
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    payment = payment_of(placed)
    payment.start_block = sent.block_number + 1
    payment.save(update_fields=["start_block"])

    # When the verifier passes over those blocks
    chain.mine(2)
    report = scan_network(network=Network.objects.get(slug="local"))

    # Then it read the transfer's log but did not credit it: the payment still waits, and so does the order
    assert report.from_block <= sent.block_number <= report.to_block
    assert (report.logs, report.credited) == (1, 0)
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("awaiting_payment", "pending")
    assert seen["payment"]["received_base_units"] == "0"
    assert seen["payment"]["tx_hashes"] == []
    assert not Credit.objects.exists()

"""A reorganisation that takes a transfer away un-credits the payment and moves the order back.

anvil_reorg takes `[depth, [[raw signed tx, block offset], ...]]`: with `[3, []]` the last three blocks are
replaced by empty ones (a transfer in them vanishes: receipt null, no `removed` logs); with the raw
transaction listed it is re-mined in the given one of the new blocks (same hash, new block).
"""

from __future__ import annotations

import contextlib
import datetime as dt

import pytest
from django.utils import timezone

from orders.models import Reservation
from payments.models import Credit
from payments.review import Decision, ReviewError, payment_review_decide
from tests.payments.verification.helpers import order_of, order_steps, payment_of, payment_steps, units

# Every RPC read goes through a provider with tight limits (small log ranges and batches, 429s): issue 26.
pytestmark = pytest.mark.usefixtures("tight_provider")


def reorg(chain, depth: int, reinsert: tuple[tuple[str, int], ...] = ()) -> None:
    chain.node.call("anvil_reorg", [depth, [[raw, offset] for raw, offset in reinsert]])


def transfer_after_mint(chain, placed: dict):
    """Mint, mine past a reorg's reach, then transfer: a reorg of depth 3 can re-mine the transfer alone."""
    chain.wallet.mint(chain.usdc, units(placed))
    chain.mine(3)
    return chain.wallet.transfer(chain.usdc, placed["payment"]["address"], units(placed))


def make_late(placed: dict) -> None:
    payment = payment_of(placed)
    payment.expires_at = timezone.now() - dt.timedelta(minutes=5)
    payment.save(update_fields=["expires_at"])


def test_a_detected_transfer_that_a_reorg_removes_is_uncredited_and_the_payment_waits_again(chain, customer, scan_pass):
    # Given a USDC transfer detected at 1 of 2 confirmations, which holds the order's lot past its window
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    scan_pass()
    assert (payment_of(placed).status, payment_of(placed).confirmations) == ("detected", 1)
    assert Reservation.objects.get(order=order_of(placed)).expires_at is None
    head = chain.head()

    # When a reorg of depth 3 replaces the transfer's block (and the mint before it) with empty blocks
    reorg(chain, 3)
    assert chain.head() == head
    assert chain.node.call("eth_getTransactionReceipt", [sent.tx_hash]) is None
    scan_pass()

    # Then the credit is kept as evidence but no longer counts, and the payment is pending again
    credit = Credit.objects.get(payment=payment_of(placed))
    assert credit.removed_at is not None
    assert "reorg" in credit.removed_reason
    seen = customer.read(placed)
    assert seen["payment"]["status"] == "pending"
    assert (seen["payment"]["received_base_units"], seen["payment"]["tx_hashes"]) == ("0", [])
    assert payment_steps(placed) == [("pending", "detected"), ("detected", "pending")]
    # And the order still awaits payment, its lot held only until the end of the payment window again
    assert seen["status"] == "awaiting_payment"
    assert Reservation.objects.get(order=order_of(placed)).expires_at == payment_of(placed).expires_at


def test_an_order_in_review_goes_back_to_awaiting_payment_when_a_reorg_removes_its_late_transfer(
    chain, customer, scan_pass
):
    # Given a late USDC transfer, seen at 1 confirmation, that sent the order to review
    placed = customer.order()
    make_late(placed)
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("late", "needs_review")

    # When a reorg takes the transfer away and the verifier passes
    reorg(chain, 3)
    scan_pass()

    # Then the payment is pending again and the order back to awaiting payment
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("awaiting_payment", "pending")
    assert payment_steps(placed) == [("pending", "late"), ("late", "pending")]
    assert order_steps(placed)[-1] == ("needs_review", "awaiting_payment", "system")


def test_the_event_that_moves_an_order_back_after_a_reorg_says_it_was_a_reorg(chain, customer, scan_pass):
    # Given a late USDC transfer, seen at 1 confirmation, that sent the order to review
    placed = customer.order()
    make_late(placed)
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    scan_pass()

    # When a reorg takes the transfer away and the verifier passes
    reorg(chain, 3)
    scan_pass()

    # Then staff reading the order's and the payment's history see why it moved back: a reorg
    assert order_of(placed).status == "awaiting_payment"
    assert "reorg" in order_of(placed).events.last().reason
    assert "reorg" in payment_of(placed).events.last().reason


def test_a_reviewers_acceptance_of_a_transfer_that_a_reorg_then_removes_does_not_leave_the_order_paid(
    chain, customer, scan_pass
):
    # Given a late USDC transfer at 1 of 2 confirmations, waiting for review
    placed = customer.order()
    make_late(placed)
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    scan_pass()
    assert order_of(placed).status == "needs_review"

    # When a reviewer accepts it (or is told to wait for it to be final), then a reorg takes the transfer away
    # and the verifier passes
    with contextlib.suppress(ReviewError):
        payment_review_decide(
            payment_id=payment_of(placed).pk, decision=Decision.ACCEPT, reason="late by minutes", reviewer="rita"
        )
    reorg(chain, 3)
    scan_pass()

    # Then the credit is gone, and the order is not left paid with no money behind it
    assert Credit.objects.get(payment=payment_of(placed)).removed_at is not None
    assert payment_of(placed).received_base_units == 0
    assert order_of(placed).status in ("awaiting_payment", "needs_review")


def test_a_transfer_re_mined_in_another_block_by_a_reorg_is_counted_once_in_its_new_block(chain, customer, scan_pass):
    # Given a USDC transfer detected at 1 of 2 confirmations, the tokens minted a few blocks before
    placed = customer.order()
    sent = transfer_after_mint(chain, placed)
    scan_pass()
    old_hash = Credit.objects.get().block_hash

    # When a reorg of depth 3 re-mines the transfer in the middle new block, and the verifier passes
    reorg(chain, 3, ((sent.raw, 1),))
    receipt = chain.node.call("eth_getTransactionReceipt", [sent.tx_hash])
    assert receipt["blockHash"] != old_hash
    scan_pass()

    # Then the one credit follows it to its new block, final at 2 confirmations: the order is paid
    credit = Credit.objects.get()
    assert credit.removed_at is None
    assert (credit.block_number, credit.block_hash) == (int(receipt["blockNumber"], 16), receipt["blockHash"])
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()]


def test_a_transfer_re_mined_lower_than_before_by_a_reorg_still_pays_the_order(chain, customer, scan_pass):
    # Given a USDC transfer detected at 1 of 2 confirmations, the tokens minted a few blocks before
    placed = customer.order()
    sent = transfer_after_mint(chain, placed)
    scan_pass()

    # When a reorg of depth 3 re-mines it in the first new block (two below where it was)
    reorg(chain, 3, ((sent.raw, 0),))
    receipt = chain.node.call("eth_getTransactionReceipt", [sent.tx_hash])
    assert int(receipt["blockNumber"], 16) == sent.block_number - 2
    assert int(receipt["status"], 16) == 1
    # And the verifier passes while the chain grows
    scan_pass()
    chain.mine(3)
    scan_pass()

    # Then the transfer, on the chain with 6 confirmations, still pays the order
    seen = customer.read(placed)
    credit = Credit.objects.get()
    assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()], f"credit removed: {credit.removed_reason}"
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")

"""A reorg deeper than the confirmation depth (issue 6, faults).

A credit that became final stays watched for PAYMENT_REORG_WATCH_HOURS (while its address is watched). When
a reorg deeper than the network's confirmations takes its transaction away or moves it to another block, the
order is not silently un-paid (its access may be given already): it goes to needs_review, or keeps its status
with an event row when it is being prepared or active, and the payment's event says "reorg deeper than N
confirmations: tx ... block ...". The local network confirms at 2; these reorgs are 4 to 6 blocks deep.
"""

from __future__ import annotations

from orders.models import Reservation
from orders.orders import order_transition
from payments.models import Credit, Network
from payments.networks import rpc_client
from payments.scan import scan_network
from tests.payments.verification.helpers import order_of, order_steps, payment_of, payment_steps, units
from tests.payments.verification.test_reorg import reorg, transfer_after_mint


def paid_and_final(chain, customer, scan_pass) -> tuple[dict, str, int]:
    """A USDC order paid by one transfer with 5 confirmations (final at 2): (order, tx hash, block)."""
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(4)
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    assert Credit.objects.get(tx_hash=sent.tx_hash.lower()).final
    return placed, sent.tx_hash.lower(), sent.block_number


def test_a_reorg_deeper_than_the_confirmations_that_takes_a_paid_transfer_away_sends_the_order_to_review(
    chain, customer, scan_pass
):
    # Given an order paid by a transfer that is final (5 confirmations, 2 required)
    placed, tx_hash, block = paid_and_final(chain, customer, scan_pass)

    # When a reorg 6 blocks deep replaces the transfer's block (and those after it) with empty ones
    reorg(chain, 6)
    assert chain.node.call("eth_getTransactionReceipt", [tx_hash]) is None
    scan_pass()

    # Then the credit is kept as evidence, no longer counted, and says what happened
    credit = Credit.objects.get(tx_hash=tx_hash)
    assert credit.removed_at is not None
    expected = f"reorg deeper than 2 confirmations: tx {tx_hash} block {block}"
    assert credit.removed_reason.startswith(expected)
    # And the payment's event row tells reviewers, and the order waits for one instead of going back to
    # awaiting payment; its lot stays held
    event = payment_of(placed).events.last()
    assert (event.from_status, event.to_status, event.actor) == ("confirmed", "pending", "system")
    assert expected in event.reason and "a reviewer decides" in event.reason
    assert order_steps(placed)[-1] == ("paid", "needs_review", "system")
    assert expected in order_of(placed).events.last().reason
    assert customer.read(placed)["status"] == "needs_review"
    hold = Reservation.objects.get(order=order_of(placed))
    assert (hold.released_at, hold.expires_at) == (None, None)

    # When the verifier passes again, then nothing moves on its own: the order waits for the reviewer
    steps = payment_steps(placed)
    scan_pass()
    assert payment_steps(placed) == steps
    assert order_of(placed).status == "needs_review"


def test_a_deep_reorg_under_an_active_order_leaves_its_access_alone_and_writes_an_event_for_reviewers(
    chain, customer, scan_pass
):
    # Given a final payment, and an order whose access was prepared and handed over
    placed, tx_hash, block = paid_and_final(chain, customer, scan_pass)
    order = order_of(placed)
    order_transition(order=order, to="preparing", actor="operator olga", reason="prepare")
    order_transition(order=order, to="active", actor="system", reason="preflight passed, access granted")

    # When a reorg deeper than the confirmations takes the transfer away, and the verifier passes
    reorg(chain, 6)
    scan_pass()

    # Then the order stays active, with an event row saying why a reviewer must look, and so does the payment
    expected = f"reorg deeper than 2 confirmations: tx {tx_hash} block {block}"
    event = order_of(placed).events.last()
    assert (event.from_status, event.to_status, event.actor) == ("active", "active", "system")
    assert expected in event.reason
    assert order_of(placed).status == "active"
    assert expected in payment_of(placed).events.last().reason
    assert int(payment_of(placed).received_base_units) == 0


def test_a_paid_transfer_re_mined_in_another_block_by_a_deep_reorg_goes_to_review_then_pays_once_final_again(
    chain, customer, scan_pass
):
    # Given an order paid by a transfer that is final (4 confirmations, 2 required), minted blocks before
    placed = customer.order()
    sent = transfer_after_mint(chain, placed)
    chain.mine(3)
    scan_pass()
    assert order_of(placed).status == "paid"
    old_hash = Credit.objects.get().block_hash

    # When a reorg 4 blocks deep re-mines the transfer at the same height in a new block, and the verifier passes
    reorg(chain, 4, ((sent.raw, 0),))
    receipt = chain.node.call("eth_getTransactionReceipt", [sent.tx_hash])
    assert (int(receipt["blockNumber"], 16), receipt["blockHash"] != old_hash) == (sent.block_number, True)
    scan_pass()

    # Then the credit follows it to its new block, not final there yet, and a reviewer is told
    credit = Credit.objects.get()
    assert (credit.block_hash, credit.final, credit.removed_at) == (receipt["blockHash"], False, None)
    assert "reorg deeper than 2 confirmations" in payment_of(placed).events.last().reason
    assert (payment_of(placed).status, order_of(placed).status) == ("detected", "needs_review")

    # When the verifier passes again, then the transfer is final in its new block and the order paid: nothing
    # was lost, and it was counted once
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    assert Credit.objects.count() == 1
    assert int(payment_of(placed).received_base_units) == units(placed)
    assert [step[:2] for step in order_steps(placed)[-3:]] == [
        ("awaiting_payment", "paid"),
        ("paid", "needs_review"),
        ("needs_review", "paid"),
    ]


def counted_pass() -> tuple[int, int]:
    client = rpc_client(Network.objects.get(slug="local"))
    scan_network(network=Network.objects.get(slug="local"), client=client)
    return client.calls, client.requests


def test_watching_final_credits_costs_one_block_read_per_pass_whatever_their_number(
    chain, customer, scan_pass, settings
):
    # Given one paid order whose credit is final, and a pass that finds nothing new
    paid_and_final(chain, customer, scan_pass)
    one = counted_pass()

    # When three more orders are paid and final, and the same kind of pass runs
    for _ in range(3):
        paid_and_final(chain, customer, scan_pass)
    four = counted_pass()

    # Then it costs the same calls and requests: one block read, not a receipt per credit
    assert four == one
    # And with the watch window closed, that one block read (one request, as no receipt is due) is all it cost
    settings.PAYMENT_REORG_WATCH_HOURS = 0
    closed = counted_pass()
    assert closed == (one[0] - 1, one[1] - 1)

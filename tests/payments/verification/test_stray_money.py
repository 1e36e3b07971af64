"""Money the shop did not ask for: dust after settlement, tokens it does not sell, and refunds per asset.

Anyone can send anything to a public deposit address. What arrives after a payment is settled never moves
the order (a stranger's 1 wei must not block a paid order's preparation); a token the shop does not sell is
seen all the same and goes to a reviewer as a wrong asset; and what is due back is kept per asset, exact in
the units it arrived in, never added across assets.
"""

from __future__ import annotations

import pytest

from payments.models import Credit
from payments.review import Decision, payment_review_decide
from tests.payments.verification.helpers import order_of, order_steps, pay, payment_of, payment_steps, units


def paid_order(chain, customer, scan_pass) -> dict:
    """An order paid in full in USDC, final after one block and a scan."""
    placed = pay(chain, customer, scan_pass)
    assert customer.read(placed)["status"] == "paid"
    return placed


STRAYS = {
    "1 unit of another token the shop sells": lambda chain, token, to: chain.wallet.pay_token(chain.usdt, to, 1),
    "1 wei of the coin": lambda chain, token, to: chain.wallet.pay_native(to, 1),
    "1 unit of a token the shop does not sell": lambda chain, token, to: chain.wallet.pay_token(token, to, 1),
    "more of the order's own token": lambda chain, token, to: chain.wallet.pay_token(chain.usdc, to, 5),
}


@pytest.mark.parametrize("stray", STRAYS)
def test_dust_after_settlement_never_moves_a_paid_order(chain, customer, scan_pass, mailoutbox, foreign_token, stray):
    # Given a paid order
    placed = paid_order(chain, customer, scan_pass)
    steps, mails = order_steps(placed), len(mailoutbox)

    # When a stranger sends it dust, which becomes final, and the customer presses "I have paid" again
    sent = STRAYS[stray](chain, foreign_token, placed["payment"]["address"])
    chain.mine(2)
    scan_pass()
    customer.paid(placed, sent.tx_hash)

    # Then the order stays paid and the payment confirmed, with no new step and no email
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(units(placed))
    assert order_steps(placed) == steps
    assert payment_steps(placed) == [("pending", "confirmed")]
    assert len(mailoutbox) == mails
    # And the dust is recorded for reviewers, not counted, and due back in its own asset
    dust = Credit.objects.get(tx_hash=sent.tx_hash.lower())
    assert dust.after_settlement and dust.counted is False
    assert [due["base_units"] for due in seen["payment"]["refunds_due"]] == [str(int(dust.amount_base_units))]
    assert seen["payment"]["tx_hashes"] == [payment_of(placed).credits.get(after_settlement=False).tx_hash]


def test_dust_after_settlement_does_not_stop_the_preparation(chain, customer, scan_pass, foreign_token):
    # Given a paid order, whose lot is held
    placed = paid_order(chain, customer, scan_pass)

    # When 1 unit of a foreign token lands on its address
    chain.wallet.pay_token(foreign_token, placed["payment"]["address"], 1)
    chain.mine(2)
    scan_pass()

    # Then its lot is still held without a deadline: nothing stands between it and an operator's "prepare"
    order = order_of(placed)
    assert order.status == "paid"
    assert [hold.expires_at for hold in order.reservations.filter(released_at__isnull=True)] == [None]


@pytest.mark.parametrize("path", ["scan", "I have paid"])
def test_a_token_the_shop_does_not_sell_is_seen_and_goes_to_review(chain, customer, scan_pass, foreign_token, path):
    # Given an order in USDC
    placed = customer.order()

    # When the customer sends a token the shop does not sell (the amount, in its own 18 decimals)
    sent = chain.wallet.pay_token(foreign_token, placed["payment"]["address"], units(placed) * 10**12)
    chain.mine(2)
    if path == "I have paid":
        customer.paid(placed, sent.tx_hash)
    else:
        scan_pass()

    # Then it is recorded as a wrong asset, naming the token's contract, and the order goes to a reviewer
    credit = Credit.objects.get(payment=payment_of(placed))
    assert (credit.kind, credit.asset, credit.token_contract) == ("wrong_asset", None, foreign_token.lower())
    assert int(credit.amount_base_units) == units(placed) * 10**12
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "wrong_network")
    assert seen["payment"]["received_base_units"] == "0"


def test_a_rejected_payment_is_due_back_per_asset_never_summed_across_assets(chain, customer, scan_pass, foreign_token):
    # Given a USDC order that received 1 unit of USDT, 0.001 ETH and 2 units of an 18-decimal foreign token
    placed = customer.order()
    address = placed["payment"]["address"]
    chain.wallet.pay_token(chain.usdt, address, 1)
    chain.wallet.pay_native(address, 10**15)
    chain.wallet.pay_token(foreign_token, address, 2 * 10**18)
    chain.mine(2)
    scan_pass()
    assert customer.read(placed)["status"] == "needs_review"

    # When a reviewer rejects the payment
    payment_review_decide(
        payment_id=payment_of(placed).pk, decision=Decision.REJECT, reason="wrong assets", reviewer="rita"
    )

    # Then each asset is due back on its own, exact in its own units
    due = {
        (d["asset"], d["contract"]): (d["base_units"], d["amount"])
        for d in customer.read(placed)["payment"]["refunds_due"]
    }
    assert due == {
        ("USDT", chain.usdt.lower()): ("1", "0.000001"),
        ("ETH", None): (str(10**15), "0.001"),
        (None, foreign_token.lower()): (str(2 * 10**18), None),
    }


def test_marking_an_underpayment_with_stray_tokens_for_refund_keeps_each_asset_apart(chain, customer, scan_pass):
    # Given a USDC order paid 1 USDC short, plus 3 units of USDT by mistake
    placed = customer.order()
    address = placed["payment"]["address"]
    chain.wallet.pay_token(chain.usdc, address, units(placed) - 1_000_000)
    chain.wallet.pay_token(chain.usdt, address, 3)
    chain.mine(2)
    scan_pass()

    # When a reviewer marks it for refund
    payment_review_decide(payment_id=payment_of(placed).pk, decision=Decision.REFUND, reason="asked", reviewer="rita")

    # Then the USDT is due back as USDT, and the event says so in each asset's own units
    assert [(d["asset"], d["base_units"]) for d in customer.read(placed)["payment"]["refunds_due"]] == [("USDT", "3")]
    assert "marked for refund of 0.000003 USDT on local" in payment_of(placed).events.last().reason

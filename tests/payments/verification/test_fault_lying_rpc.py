"""RPC providers that lie (issue 6, faults): a head ahead of the chain, a node lagging behind it, a receipt one
provider drops. The rule: with two or more URLs configured, confirmations count from the lower of two providers'
heads, and a credit is removed or moved only when a second provider agrees; providers that disagree change
nothing until they agree. Nothing is lost: once the lie stops, the payment confirms.

The liar is a loopback provider in front of a real anvil (tests/payments/verification/rpc_proxy.py), listed first
so that the verifier asks it first; the other URL is the honest node. (A head whose timestamp is hours old, and a stale
node's answers un-crediting a transfer, are in test_rpc_failover.py.)
"""

from __future__ import annotations

import pytest

from payments.models import Credit
from tests.payments.verification.helpers import order_of, payment_of, payment_steps, units
from tests.payments.verification.rpc_proxy import RpcProxy
from tests.payments.verification.test_reorg import reorg


@pytest.fixture
def proxies(chain):
    started: list[RpcProxy] = []

    def start() -> RpcProxy:
        started.append(RpcProxy(chain.node.url))
        return started[-1]

    yield start
    for proxy in started:
        proxy.stop()


def detected_at_one_confirmation(chain, customer, scan_pass) -> tuple[dict, str]:
    """A USDC order paid by one transfer, seen by a pass on the honest node alone at 1 of 2 confirmations."""
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    scan_pass()
    assert (payment_of(placed).status, payment_of(placed).confirmations) == ("detected", 1)
    return placed, sent.tx_hash.lower()


def use_providers(monkeypatch, *urls: str) -> None:
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", ",".join(urls))


def test_a_provider_whose_head_runs_ahead_of_the_others_does_not_confirm_a_payment_on_its_own_word(
    chain, customer, scan_pass, monkeypatch, proxies
):
    # Given a transfer at 1 of 2 confirmations, and a first provider that reports a head 10 blocks past the chain
    placed, tx_hash = detected_at_one_confirmation(chain, customer, scan_pass)
    liar = proxies()
    liar.head_shift = 10
    use_providers(monkeypatch, liar.url, chain.node.url)

    # When the verifier passes
    scan_pass()

    # Then the liar was asked, yet the payment is not confirmed: the honest head says 1 confirmation
    assert liar.requests > 0
    credit = Credit.objects.get(tx_hash=tx_hash)
    assert (credit.confirmations, credit.final, credit.removed_at) == (1, False, None)
    assert (payment_of(placed).status, order_of(placed).status) == ("detected", "awaiting_payment")

    # When the chain really grows by one block, then both heads agree on 2 confirmations: the order is paid
    chain.mine(1)
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")


def test_a_provider_lagging_behind_the_chain_neither_uncredits_nor_confirms_and_the_payment_confirms_once_it_caught_up(
    chain, customer, scan_pass, monkeypatch, proxies
):
    # Given a transfer at 1 of 2 confirmations, two more blocks on the chain, and a first provider that lags
    # 10 blocks behind (a fresh-looking head, no receipt for anything newer)
    placed, tx_hash = detected_at_one_confirmation(chain, customer, scan_pass)
    chain.mine(2)
    lagging = proxies()
    lagging.head_shift = -10
    use_providers(monkeypatch, lagging.url, chain.node.url)

    # When the verifier passes
    scan_pass()

    # Then the lagging node's missing receipt did not un-credit the transfer, and its low head confirmed nothing
    credit = Credit.objects.get(tx_hash=tx_hash)
    assert credit.removed_at is None, credit.removed_reason
    assert credit.final is False
    assert "disagree" in credit.evidence["last_dispute"]
    assert payment_of(placed).status == "detected"
    assert payment_steps(placed) == [("pending", "detected")]

    # When it has caught up and the verifier passes again, then the payment is confirmed: nothing was lost
    lagging.head_shift = 0
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    assert int(payment_of(placed).received_base_units) == units(placed)


@pytest.mark.parametrize("other", ["has_it", "is_down"])
def test_a_receipt_one_provider_drops_keeps_the_credit_and_confirms_nothing_until_the_providers_agree(
    chain, customer, scan_pass, monkeypatch, proxies, other
):
    # Given a transfer at 1 of 2 confirmations, a second block on the chain, and a first provider that answers
    # "no receipt" for that transaction; the other provider has the receipt, or is down
    placed, tx_hash = detected_at_one_confirmation(chain, customer, scan_pass)
    chain.mine(1)
    liar = proxies()
    liar.drop_receipts.add(tx_hash)
    second = proxies()
    if other == "is_down":
        second.down()
    use_providers(monkeypatch, liar.url, second.url)

    # When the verifier passes
    scan_pass()

    # Then the credit still counts, unchanged, and the payment is neither un-credited nor confirmed on the word
    # of the provider that dropped the receipt; the credit's evidence says why it waits
    credit = Credit.objects.get(tx_hash=tx_hash)
    assert credit.removed_at is None, credit.removed_reason
    assert (credit.final, credit.confirmations) == (False, 1)
    assert f"127.0.0.1:{liar.port} had no receipt" in credit.evidence["last_dispute"]
    assert (payment_of(placed).status, order_of(placed).status) == ("detected", "awaiting_payment")
    assert payment_steps(placed) == [("pending", "detected")]

    # When the provider has the receipt again (and the other is back), then the payment confirms: nothing lost
    liar.drop_receipts.clear()
    second.up()
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    assert payment_steps(placed) == [("pending", "detected"), ("detected", "confirmed")]


def test_a_reorg_that_both_providers_see_uncredits_the_payment(chain, customer, scan_pass, monkeypatch, proxies):
    # Given a transfer at 1 of 2 confirmations, and two providers in front of the chain
    placed, tx_hash = detected_at_one_confirmation(chain, customer, scan_pass)
    use_providers(monkeypatch, proxies().url, proxies().url)

    # When a reorg of depth 3 takes the transfer away, and the verifier passes
    reorg(chain, 3)
    scan_pass()

    # Then both providers agree the receipt is gone: the credit is removed and the payment waits again
    credit = Credit.objects.get(tx_hash=tx_hash)
    assert credit.removed_at is not None
    assert "reorg" in credit.removed_reason
    assert (payment_of(placed).status, order_of(placed).status) == ("pending", "awaiting_payment")

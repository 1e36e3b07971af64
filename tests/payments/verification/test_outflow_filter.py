"""Transfers out are looked for only where tokens can leave (issue 26: one eth_getLogs a range instead of two
while no watched address holds anything on the network), and never missed for an address paid and emptied
inside one range: the attacker holding a deposit key moves the customer's payment out before the next pass."""

from __future__ import annotations

from payments.models import Credit, UnexpectedOutflow
from payments.scan import scan_network
from tests.payments.verification.deposit_keys import STRANGER, deposit_wallet, known_keys  # noqa: F401 - autouse
from tests.payments.verification.helpers import local, payment_of, units


def test_tokens_paid_and_taken_out_between_two_passes_are_both_found(chain, provider, customer):
    # Given an open order, seen by a pass, whose deposit key a thief holds
    placed = customer.order()
    thief = deposit_wallet(chain, placed)
    scan_network(network=local())

    # When the customer pays and the thief takes the tokens before the next pass
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    taken = thief.transfer(chain.usdc, STRANGER, units(placed))
    scan_network(network=local())

    # Then the payment and the theft are both recorded
    assert Credit.objects.filter(payment=payment_of(placed)).count() == 1
    assert UnexpectedOutflow.objects.filter(tx_hash=taken.tx_hash.lower()).exists()


def test_a_pass_over_unpaid_orders_reads_one_log_filter_a_range(chain, provider, customer):
    # Given two open orders, nothing paid, seen by a pass
    customer.order()
    customer.order()
    scan_network(network=local())
    chain.mine(5)
    provider.methods.clear()

    # When the next pass reads the new blocks
    scan_network(network=local())

    # Then it asks for the transfers in only: nothing can leave an address that received nothing (before: two)
    assert provider.methods["eth_getLogs"] == 1

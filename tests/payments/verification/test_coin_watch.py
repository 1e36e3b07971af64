"""Native coin at the watched addresses (issue 26): blocks are not read in full; the addresses' balances and
nonces are checked every COIN_CHECK_SECONDS (a coin order's balance every pass), and only a change has the blocks
since read in full. Coin sent to a token order's address still reaches a reviewer."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from payments.models import Credit, UnexpectedOutflow
from payments.networks import rpc_client
from payments.scan import scan_network
from tests.payments.verification.deposit_keys import STRANGER, deposit_wallet, known_keys  # noqa: F401 - autouse
from tests.payments.verification.helpers import local, payment_of, units
from tests.servers import rpc

INTERVAL = 600
BLOCKS = 60


@pytest.fixture
def checked_every_ten_minutes(settings):
    settings.COIN_CHECK_SECONDS = INTERVAL


def later(start: dt.datetime, seconds: int) -> dt.datetime:
    return start + dt.timedelta(seconds=seconds)


@pytest.mark.usefixtures("checked_every_ten_minutes")
def test_coin_sent_to_a_token_orders_address_is_found_by_the_next_check(chain, customer):
    # Given a USDC order whose address the scan has seen
    placed = customer.order()
    start = timezone.now()
    scan_network(network=local(), now=start)

    # When ETH is sent to it instead
    sent = chain.wallet.pay_native(placed["payment"]["address"], 10**17)
    chain.mine(1)

    # Then a pass before the check is due does not read the blocks, and the check finds it
    scan_network(network=local(), now=later(start, 60))
    assert not Credit.objects.filter(payment=payment_of(placed)).exists()
    scan_network(network=local(), now=later(start, INTERVAL + 1))
    credit = Credit.objects.get(payment=payment_of(placed))
    assert (credit.kind, credit.tx_hash) == ("wrong_asset", sent.tx_hash.lower())


@pytest.mark.usefixtures("checked_every_ten_minutes")
def test_coin_in_and_out_between_two_checks_is_found_though_the_balance_is_the_same(chain, customer):
    # Given a USDC order whose deposit key a thief holds (coin for gas on it), and a check that saw the address
    placed = customer.order()
    thief = deposit_wallet(chain, placed)
    start = timezone.now()
    scan_network(network=local(), now=start)
    chain.mine(1)
    scan_network(network=local(), now=later(start, INTERVAL + 1))

    # When ETH arrives and leaves before the next check, and the balance is back where it was
    address = placed["payment"]["address"]
    before = rpc(chain.node.url, "eth_getBalance", [address, "latest"])
    paid_in = chain.wallet.pay_native(address, 10**17)
    taken = thief.send(to=STRANGER, value=10**17)
    rpc(chain.node.url, "anvil_setBalance", [address, before])
    scan_network(network=local(), now=later(start, 2 * INTERVAL + 2))

    # Then both moves are found: the address's nonce moved
    assert Credit.objects.filter(payment=payment_of(placed), tx_hash=paid_in.tx_hash.lower()).exists()
    assert UnexpectedOutflow.objects.filter(tx_hash=taken.tx_hash.lower()).exists()


def test_a_coin_order_costs_a_balance_a_pass_and_its_payment_is_seen_on_the_next_pass(chain, customer):
    # Given an order in ETH, seen by a pass
    placed = customer.order(asset="ETH")
    scan_network(network=local())

    # When 60 blocks later a pass reads them
    chain.mine(BLOCKS)
    client = rpc_client(local())
    scan_network(network=local(), client=client)

    # Then it costs a handful of calls, not a block read per block (before: 60 full blocks)
    assert client.calls < 15, client.calls

    # And once paid, the next pass finds the payment
    chain.wallet.pay_native(placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_network(network=local())
    assert payment_of(placed).credits.count() == 1

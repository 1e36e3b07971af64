"""/metrics moved by the verifier on a real chain (anvil): the scan falling behind and catching up, a network
whose providers go down and come back, the payments open and waiting for a reviewer, and money taken from a
deposit address with its key.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from orders.models import OrderEvent
from payments.models import Network, ScanCursor
from payments.rpc import RpcUnavailable
from payments.scan import MAX_RANGES_PER_PASS, scan_network
from tests.metrics_scrape import scrape, value
from tests.payments.verification.deposit_keys import STRANGER, deposit_wallet, known_keys, paid  # noqa: F401 - fixture
from tests.payments.verification.helpers import local, order_of, units

LOCAL = {"network": "local"}


def test_a_scan_that_falls_behind_raises_the_lag_past_its_budget_and_catching_up_brings_it_back(
    chain, customer, scan_pass, client
):
    # Given an order waiting for its USDC, and a pass that has read up to the head
    customer.order()
    scan_pass()
    first = scrape(client)
    assert value(first, "payments_scan_lag_blocks", **LOCAL) == 0
    assert value(first, "payments_open", **LOCAL) == 1
    budget = value(first, "payments_scan_lag_budget_blocks", **LOCAL)
    assert budget == local().scan_lag_budget_blocks == 150
    last_success = value(first, "payments_scan_last_success_timestamp_seconds", **LOCAL)
    assert abs(last_success - timezone.now().timestamp()) < 60

    # When the chain runs far ahead and a pass can read only part of it (one block per range, 50 ranges)
    Network.objects.filter(slug="local").update(max_block_range=1)
    chain.mine(MAX_RANGES_PER_PASS + 200)
    scan_pass()

    # Then the lag is what the pass could not read, past the network's budget: the alert's condition
    behind = scrape(client)
    cursor = ScanCursor.objects.get(network=local())
    lag = value(behind, "payments_scan_lag_blocks", **LOCAL)
    assert lag == chain.head() - (cursor.next_block - 1) > budget
    assert value(behind, "payments_scan_last_success_timestamp_seconds", **LOCAL) >= last_success

    # When the passes catch up
    Network.objects.filter(slug="local").update(max_block_range=1000)
    scan_pass()

    # Then the lag is back to zero
    assert value(scrape(client), "payments_scan_lag_blocks", **LOCAL) == 0


def test_a_network_whose_providers_are_down_counts_rpc_errors_and_shows_down_until_they_are_back(
    chain, providers, customer, client
):
    # Given a network whose pass worked
    customer.order()
    scan_network(network=local())
    before = scrape(client)
    assert value(before, "payments_network_up", **LOCAL) == 1
    assert value(before, "payments_rpc_errors_total", **LOCAL) == 0
    last_success = value(before, "payments_scan_last_success_timestamp_seconds", **LOCAL)

    # When every provider goes down and two passes try
    for proxy in providers:
        proxy.down()
    for _ in range(2):
        with pytest.raises(RpcUnavailable):
            scan_network(network=local())

    # Then each failed pass counted, the network is down, and its last success did not move
    down = scrape(client)
    assert value(down, "payments_rpc_errors_total", **LOCAL) == 2
    assert value(down, "payments_network_up", **LOCAL) == 0
    assert value(down, "payments_scan_last_success_timestamp_seconds", **LOCAL) == last_success

    # When they are back, the network is up again; the counter keeps what happened (a counter never goes down)
    for proxy in providers:
        proxy.up()
    scan_network(network=local())
    back = scrape(client)
    assert value(back, "payments_network_up", **LOCAL) == 1
    assert value(back, "payments_rpc_errors_total", **LOCAL) == 2


def test_an_underpaid_order_waiting_for_a_reviewer_shows_how_long_it_has_waited(chain, customer, scan_pass, client):
    # Given no order waits for a reviewer
    placed = customer.order()
    assert value(scrape(client), "payments_review_oldest_seconds") == 0

    # When less than the quote arrives, the order goes to review; three hours pass
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) // 2)
    chain.mine(1)
    scan_pass()
    assert order_of(placed).status == "needs_review"
    OrderEvent.objects.filter(order=order_of(placed), to_status="needs_review").update(
        created_at=timezone.now() - dt.timedelta(hours=3)
    )

    # Then the oldest wait is about three hours, and the payment no longer counts as open
    samples = scrape(client)
    assert 3 * 3600 <= value(samples, "payments_review_oldest_seconds") < 3 * 3600 + 60
    assert value(samples, "payments_open", **LOCAL) == 0
    assert value(samples, "shop_orders", status="needs_review") == 1


def test_money_taken_from_a_deposit_address_moves_the_unexpected_outflows_counter_once(
    chain, customer, scan_pass, client
):
    # Given a paid order, and someone who holds its deposit key
    placed = paid(chain, customer, scan_pass)
    assert value(scrape(client), "payments_unexpected_outflows_total") == 0
    thief = deposit_wallet(chain, placed)

    # When they send the money to an address of their own, and the blocks are scanned twice
    thief.transfer(chain.usdc, STRANGER, units(placed))
    scan_pass()
    scan_pass()

    # Then the counter moved by one
    assert value(scrape(client), "payments_unexpected_outflows_total") == 1

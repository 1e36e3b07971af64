"""The watcher on providers that refuse what is too big (issue 26): a loopback provider in front of anvil
(tests/verification/rpc_proxy.py) caps eth_getLogs ranges, batch sizes and answers, and rate-limits with 429.
Payments made while the watcher was far behind are credited without staff action; no call's result is ever
taken for a null."""

from __future__ import annotations

import pytest

from payments.models import Network
from payments.rpc import RpcClient
from payments.scan import scan_network
from tests.verification.helpers import payment_of, units
from tests.verification.rpc_proxy import RpcProxy

BEHIND = 400


@pytest.fixture
def provider(chain, monkeypatch):
    """The `local` network's only provider, with limits a test sets."""
    proxy = RpcProxy(chain.node.url)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", proxy.url)
    yield proxy
    proxy.stop()


def local() -> Network:
    return Network.objects.get(slug="local")


@pytest.mark.parametrize("style", ["quicknode", "alchemy"])
def test_orders_paid_while_the_watcher_was_400_blocks_behind_are_credited_on_a_capped_provider(
    chain, provider, customer, style, settings
):
    settings.RPC_RETRY_AFTER_MAX_SECONDS = 0.2  # the provider's Retry-After (1 s), bounded shorter for the test
    # Given a provider that serves 50-block log ranges, 20-call batches, and answers one request in four with 429
    provider.log_range_cap, provider.log_range_style = 50, style
    provider.batch_cap, provider.rate_limit_every = 20, 4
    usdc_order, eth_order = customer.order(), customer.order(asset="ETH")
    staff_set = local().max_block_range
    scan_network(network=local())

    # When both orders are paid while the watcher is 400 blocks behind
    chain.mine(BEHIND // 2)
    chain.wallet.pay_token(chain.usdc, usdc_order["payment"]["address"], units(usdc_order))
    chain.wallet.pay_native(eth_order["payment"]["address"], units(eth_order))
    chain.mine(BEHIND // 2)

    # Then a few passes credit both, without anyone lowering max_block_range, and a pass at the head succeeds
    for _ in range(4):
        scan_network(network=local())
    assert payment_of(usdc_order).status == "confirmed"
    assert payment_of(eth_order).status == "confirmed"
    assert local().max_block_range == staff_set
    assert provider.rate_limited > 0
    scan_network(network=local())


def test_a_batch_answer_missing_a_calls_result_is_never_a_null(chain, provider):
    # Given a provider that answers only the first call of a batch
    provider.batch_answers_cap = 1
    client = RpcClient([provider.url])

    # Then the batch's results are all there, split and asked again (before: a None for each call left out)
    blocks = client.batch([("eth_getBlockByNumber", [hex(n), False]) for n in range(3)])
    assert [int(block["number"], 16) for block in blocks] == [0, 1, 2]


def test_a_provider_that_refuses_batches_is_asked_one_call_at_a_time(chain, provider):
    provider.refuse_batches = True
    client = RpcClient([provider.url])
    blocks = client.batch([("eth_getBlockByNumber", [hex(n), False]) for n in range(3)])
    assert [int(block["number"], 16) for block in blocks] == [0, 1, 2]

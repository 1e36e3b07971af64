"""The watcher on providers that refuse what is too big (issue 26): a loopback provider in front of anvil
(tests/payments/verification/rpc_proxy.py) caps eth_getLogs ranges, batch sizes and answers, and rate-limits with 429.
Payments made while the watcher was far behind are credited without staff action; no call's result is ever
taken for a null; a refusal in the middle of a pass loses no payment."""

from __future__ import annotations

import pytest

from payments.models import Credit, ScanCursor
from payments.rpc import RpcClient, RpcUnavailable
from payments.scan import scan_network
from tests.payments.verification.helpers import local, payment_of, units
from tests.payments.verification.rpc_proxy import RpcProxy

BEHIND = 400


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


class QuotaRunsOutMidPass(RpcProxy):
    """A provider whose quota runs out partway through a pass: from the first eth_getLogs that starts after block
    `runs_out_after`, it refuses every request ("Too Many Requests", then HTTP 429) until `recover()`."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.runs_out_after: int | None = None
        self.refused_from: int | None = None  # the first block of the eth_getLogs it refused first
        self.exhausted = False

    def recover(self) -> None:
        self.runs_out_after, self.exhausted = None, False

    def rate_limited_now(self) -> bool:
        return self.exhausted or super().rate_limited_now()

    def limited_answer(self, body):
        starts = [logs_from(call) for call in (body if isinstance(body, list) else [body])]
        late = [start for start in starts if start is not None and start > (self.runs_out_after or float("inf"))]
        if not late:
            return super().limited_answer(body)
        self.exhausted = True
        self.refused_from = self.refused_from if self.refused_from is not None else min(late)
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32005, "message": "Too Many Requests"}}


def logs_from(call: dict) -> int | None:
    """The first block an eth_getLogs call reads; None for any other call."""
    if call.get("method") != "eth_getLogs":
        return None
    return int((call.get("params") or [{}])[0].get("fromBlock", "0x0"), 16)


@pytest.fixture
def quota_runs_out(chain, monkeypatch, settings):
    """The `local` network's only provider: 5-block log ranges (a pass reads several), a quota that runs out."""
    settings.RPC_RETRY_AFTER_MAX_SECONDS = 0
    proxy = QuotaRunsOutMidPass(chain.node.url)
    proxy.log_range_cap, proxy.batch_cap = 5, 3
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", proxy.url)
    yield proxy
    proxy.stop()


def test_no_payment_is_lost_when_the_provider_refuses_in_the_middle_of_a_pass(chain, customer, quota_runs_out):
    # Given a USDC order paid a few blocks after the watcher's last pass, and an ETH order paid later still
    early, late = customer.order(), customer.order(asset="ETH")
    scan_network(network=local())
    chain.mine(8)
    paid_early = chain.wallet.pay_token(chain.usdc, early["payment"]["address"], units(early))
    chain.mine(8)
    paid_late = chain.wallet.pay_native(late["payment"]["address"], units(late))
    chain.mine(8)

    # When the provider refuses everything from the range after the USDC payment's on, longer than the client retries
    quota_runs_out.runs_out_after = paid_early.block_number
    with pytest.raises(RpcUnavailable):
        scan_network(network=local())

    # Then the pass kept what it had read in full (the USDC transfer is recorded, to be settled by a later pass),
    # and its cursor stops where the refusal landed, not past it
    assert paid_early.block_number < quota_runs_out.refused_from <= paid_late.block_number
    assert ScanCursor.objects.get(network=local()).next_block == quota_runs_out.refused_from
    assert [credit.tx_hash for credit in Credit.objects.all()] == [paid_early.tx_hash.lower()]

    # When the provider recovers and the watcher passes again
    quota_runs_out.recover()
    scan_network(network=local())

    # Then both orders are paid, each transfer counted once
    for placed, sent in ((early, paid_early), (late, paid_late)):
        seen = customer.read(placed)
        assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
        assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()]
        assert Credit.objects.filter(payment=payment_of(placed)).count() == 1

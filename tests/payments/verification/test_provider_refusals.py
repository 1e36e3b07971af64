"""Providers that answer without serving (issue 39, item 6): one that does not serve `eth_getLogs` (an error inside
an HTTP 200), one that drips its answers a byte at a time, one whose answers are too large. Each is a loopback
provider in front of the real anvil (tests/payments/verification/rpc_proxy.py), listed first; the second provider
is healthy. The call goes to the second, the first is backed off, and the payment confirms as it would without
the bad one; a pass never waits on a slow provider past the request's deadline."""

from __future__ import annotations

import time

import pytest

from payments.rpc import BACKOFF, RpcClient, RpcResponseError
from tests.payments.verification.helpers import order_of, payment_of, units
from tests.payments.verification.rpc_proxy import RpcProxy


@pytest.fixture
def bad_then_good(chain, monkeypatch):
    """The `local` network's providers: a bad one first (the test makes it bad), then a healthy one."""
    bad, good = RpcProxy(chain.node.url), RpcProxy(chain.node.url)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{bad.url},{good.url}")
    yield bad, good
    for proxy in (bad, good):
        proxy.stop()


def paid_and_scanned(chain, customer, scan_pass) -> dict:
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(2)
    scan_pass()
    return placed


def test_a_provider_that_does_not_serve_eth_getlogs_is_passed_over_for_the_call(
    chain, customer, scan_pass, bad_then_good
):
    # Given a first provider that answers eth_getLogs with -32601 in an HTTP 200, a healthy second one
    bad, good = bad_then_good
    bad.refused_methods = {"eth_getLogs"}

    # When a USDC order is paid and the verifier passes
    placed = paid_and_scanned(chain, customer, scan_pass)

    # Then the second provider served the logs and the payment is confirmed (before: every pass failed on the first
    # provider's error and the order stayed unpaid)
    assert good.methods["eth_getLogs"] > 0
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")


def test_an_error_that_every_provider_gives_is_still_the_calls_own_error(chain, bad_then_good):
    # Given two providers that both refuse the method (a method no plan serves)
    bad, good = bad_then_good
    bad.refused_methods = good.refused_methods = {"debug_traceTransaction"}

    # Then the caller gets the node's error, as with one provider: not "every provider is down"
    with pytest.raises(RpcResponseError, match="does not exist"):
        RpcClient([bad.url, good.url]).call("debug_traceTransaction", ["0x" + "00" * 32])


def test_a_reverted_call_is_an_answer_not_a_provider_failure(chain, bad_then_good):
    # Given an eth_call that reverts (the shop checks refund addresses with calls that may revert)
    bad, good = bad_then_good
    call = {"to": chain.usdc, "data": "0xdeadbeef"}

    # Then the first provider's revert is the answer: the second is not asked, the first not backed off
    with pytest.raises(RpcResponseError, match="revert"):
        RpcClient([bad.url, good.url]).call("eth_call", [call, "latest"])
    assert good.methods["eth_call"] == 0
    assert BACKOFF.failures(bad.url) == 0


def test_a_provider_that_drips_its_answers_never_holds_a_pass_past_the_deadline(
    chain, customer, scan_pass, bad_then_good, settings
):
    # Given a first provider that sends each answer one byte every 50 ms (a 1 kB answer: almost a minute, while no
    # read ever waits long enough for the read timeout), and a request deadline of 2 s
    settings.RPC_ANSWER_DEADLINE_SECONDS = 2
    bad, good = bad_then_good
    bad.drip_seconds = 0.05

    # When a USDC order is paid and the verifier passes
    started = time.monotonic()
    placed = paid_and_scanned(chain, customer, scan_pass)

    # Then the pass gave up on the slow provider at the deadline, asked the second, and confirmed the payment
    assert time.monotonic() - started < 30
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    assert BACKOFF.failures(bad.url) >= 1


def test_an_answer_over_the_size_bound_is_a_failure_of_that_provider(chain, bad_then_good, settings):
    # Given answers bounded to 64 kB, and a first provider whose answers are 200 kB (valid JSON, padded)
    settings.RPC_MAX_ANSWER_BYTES = 64_000
    bad, good = bad_then_good
    bad.padding = 200_000

    # Then the answer comes from the second provider, and the first is backed off
    assert int(RpcClient([bad.url, good.url]).call("eth_blockNumber"), 16) > 0
    assert good.methods["eth_blockNumber"] == 1
    assert BACKOFF.failures(bad.url) == 1

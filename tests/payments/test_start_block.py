"""Where a payment starts being watched: a head read in the last few seconds (by the scan or by an earlier
checkout), else the chain asked there and then; never above the chain's head, so a transfer sent after the
order was placed always counts."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.utils import timezone

from payments.checkout import HEAD_FRESH_SECONDS, quote_prepare
from payments.models import Network
from payments.quotes import QuoteError
from payments.rpc import RpcClient

pytestmark = pytest.mark.django_db
AMOUNT = Decimal("1990.00")


@pytest.fixture
def chain_reads(monkeypatch) -> list[int]:
    """Every eth_blockNumber a checkout sends, with what it answered."""
    reads: list[int] = []
    original = RpcClient.block_number

    def counted(self) -> int:
        number = original(self)
        reads.append(number)
        return number

    monkeypatch.setattr(RpcClient, "block_number", counted)
    return reads


def scan_recorded(*, head: int | None, ok: bool = True, seconds_ago: float = 0) -> None:
    """What a scan pass writes when it reaches (or fails to reach) the network (payments.networks)."""
    checked = timezone.now() - dt.timedelta(seconds=seconds_ago)
    Network.objects.filter(slug="local").update(rpc_ok=ok, rpc_checked_at=checked, head_block=head)


def test_with_nothing_read_lately_the_quote_asks_the_chain_for_its_height(anvil, local_eth, chain_reads):
    # Given a chain that moved on, and no head read in the last few seconds
    anvil.mine(3)
    height = anvil.block_number()

    # When a quote is prepared
    quote = quote_prepare(asset=local_eth, amount_usd=AMOUNT)

    # Then it asked the chain once and starts at its height
    assert chain_reads == [height]
    assert quote.start_block == height


def test_a_head_the_scan_recorded_a_moment_ago_is_used_without_asking_the_chain(
    anvil, local_eth, chain_reads, monkeypatch, closed_rpc_url
):
    # Given a scan pass that reached the network a moment ago, and the chain moving on since
    height = anvil.block_number()
    scan_recorded(head=height)
    anvil.mine(2)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", closed_rpc_url)  # asking now would fail

    # When a quote is prepared
    quote = quote_prepare(asset=local_eth, amount_usd=AMOUNT)

    # Then no request went to the chain, and the recorded head (below the real one) is the start block
    assert chain_reads == []
    assert quote.start_block == height < anvil.block_number()


def test_quotes_a_few_seconds_apart_share_one_read_of_the_chain(anvil, local_eth, chain_reads):
    # Given a quote that asked the chain
    first = quote_prepare(asset=local_eth, amount_usd=AMOUNT)
    anvil.mine(1)

    # When another one follows at once
    second = quote_prepare(asset=local_eth, amount_usd=AMOUNT)

    # Then it reuses that reading: one request in all, a start block at or below the head
    assert len(chain_reads) == 1
    assert second.start_block == first.start_block <= anvil.block_number()

    # And once the reading has aged out, the chain is asked again
    cache.clear()  # what HEAD_FRESH_SECONDS of waiting does
    third = quote_prepare(asset=local_eth, amount_usd=AMOUNT)
    assert len(chain_reads) == 2
    assert third.start_block == anvil.block_number()


def test_a_head_recorded_longer_ago_than_a_few_seconds_is_not_used(anvil, local_eth, chain_reads):
    # Given a head the scan recorded a while ago, far below the chain's height now
    scan_recorded(head=1, seconds_ago=HEAD_FRESH_SECONDS + 30)
    anvil.mine(2)

    # When a quote is prepared
    quote = quote_prepare(asset=local_eth, amount_usd=AMOUNT)

    # Then the chain is asked, and its height is the start block
    assert quote.start_block == anvil.block_number() == chain_reads[-1]


@pytest.mark.parametrize(
    ("record", "why"),
    [
        pytest.param({"head": None, "ok": False}, "the scan found it down", id="scan-found-it-down"),
        pytest.param({"head": 7, "seconds_ago": HEAD_FRESH_SECONDS + 30}, "heard of long ago", id="stale-record"),
        pytest.param({"head": None}, "no head recorded", id="no-head"),
    ],
)
def test_a_network_not_heard_from_lately_that_does_not_answer_is_refused(
    anvil, local_eth, monkeypatch, closed_rpc_url, record, why
):
    # Given no usable head read in the last few seconds, and a network that does not answer
    scan_recorded(**record)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", closed_rpc_url)

    # When a quote is prepared / Then it is refused with a message the customer can act on
    with pytest.raises(QuoteError) as refused:
        quote_prepare(asset=local_eth, amount_usd=AMOUNT)
    assert "Local development chain is not answering right now" in str(refused.value), why


def test_a_reading_from_other_rpc_urls_is_not_reused(anvil, local_eth, monkeypatch, closed_rpc_url):
    # Given a quote that read the chain through the configured URL
    quote_prepare(asset=local_eth, amount_usd=AMOUNT)

    # When an operator points the network at other providers, which do not answer
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", closed_rpc_url)

    # Then the next quote asks them (the earlier reading says nothing about them), and is refused
    with pytest.raises(QuoteError):
        quote_prepare(asset=local_eth, amount_usd=AMOUNT)


def test_a_start_block_from_a_recent_head_is_never_above_the_chains_head(anvil, local_eth):
    # Given quotes prepared while the chain moves on, from recorded heads, cached readings and the chain itself
    starts = []
    for step in range(6):
        if step == 2:
            scan_recorded(head=anvil.block_number())
        if step == 4:
            cache.clear()
        starts.append((quote_prepare(asset=local_eth, amount_usd=AMOUNT).start_block, anvil.block_number()))
        anvil.mine(1)

    # Then every start block was at or below the head at the time: a transfer sent after the quote is in a later
    # block, so it counts (credits.counts_for: block_number >= start_block)
    assert all(start <= head for start, head in starts), starts

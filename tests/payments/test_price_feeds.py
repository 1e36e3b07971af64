"""A native coin is quoted from its network's on-chain USD price feed (Chainlink's AggregatorV3Interface), read on
a real anvil: a fresh, complete, positive answer prices the quote; a stale, incomplete, non-positive, unreadable or
missing one is refused without an exception escaping, and a fresh staff rate, then the existing refusal, take over."""

from __future__ import annotations

import os
import time
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.utils import timezone

from payments.devnet import deploy_price_feed, deploy_token, devnet_setup, funded_account, send_and_wait
from payments.models import Asset, Network, Rate
from payments.networks import networks_offered
from payments.price_feeds import HEARTBEAT_GRACE_SECONDS
from payments.quotes import QuoteError, usd_rate
from payments.rpc import RpcClient
from tests.payments.verification.chain import call_data
from tests.servers import Anvil

HEARTBEAT = 3600
NO_PRICE = "There is no up-to-date price for ETH right now: choose a stablecoin or try again later."


@pytest.fixture(scope="module")
def feed_node():
    """An anvil of this module's own: its deployments move no address another test relies on."""
    node = Anvil()
    yield node
    node.stop()


@pytest.fixture
def client(db, feed_node, monkeypatch) -> RpcClient:
    """A mainnet-like network (not a development chain: no fixed rate to fall back on) served by the anvil."""
    for name in list(os.environ):
        if name.startswith("CHAIN_RPC_URLS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CHAIN_RPC_URLS_FEEDNET", feed_node.url)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", feed_node.url)
    return RpcClient([feed_node.url])


@pytest.fixture
def feednet(client) -> Network:
    return Network.objects.create(slug="feednet", name="Feed net", chain_id=777_001, max_head_age_seconds=0)


def coin(network: Network, feed: str | None) -> Asset:
    return Asset.objects.create(
        network=network,
        symbol="ETH",
        name="Ether",
        decimals=18,
        price_feed=feed,
        price_feed_heartbeat_seconds=HEARTBEAT,
    )


def new_feed(client: RpcClient, answer: int = 2500_12345678) -> str:
    return deploy_price_feed(client, decimals=8, description="ETH / USD", answer=answer)


def set_round(client: RpcClient, feed: str, *, round_id=7, answer=2500_00000000, updated_at=None, answered=None):
    updated_at = int(time.time()) if updated_at is None else updated_at
    data = call_data(
        "setRoundData(uint80,int256,uint256,uint256,uint80)",
        ["uint80", "int256", "uint256", "uint256", "uint80"],
        [round_id, answer, updated_at, updated_at, round_id if answered is None else answered],
    )
    send_and_wait(client, {"from": funded_account(client), "to": feed, "data": data})
    cache.clear()  # what a quote 30 s later would see


def staff_rate(asset: Asset, usd: str) -> None:
    Rate.objects.create(asset=asset, usd_per_unit=Decimal(usd), as_of=timezone.now(), source="staff")


def test_a_fresh_feed_prices_the_coin_and_the_answer_is_recorded_as_a_rate(client, feednet):
    feed = new_feed(client)
    eth = coin(feednet, feed)

    rate = usd_rate(eth)

    assert rate.usd_per_unit == Decimal("2500.12345678")
    assert abs((timezone.now() - rate.as_of).total_seconds()) < 60
    recorded = Rate.objects.get(asset=eth)
    assert (recorded.source, recorded.usd_per_unit, recorded.as_of) == (
        f"chainlink:{feed}",
        rate.usd_per_unit,
        rate.as_of,
    )


def test_the_feed_beats_a_staff_rate_and_one_round_is_recorded_once(client, feednet):
    eth = coin(feednet, new_feed(client))
    staff_rate(eth, "1999")

    first, second = usd_rate(eth), usd_rate(eth)

    assert first == second
    assert first.usd_per_unit == Decimal("2500.12345678")
    assert Rate.objects.filter(asset=eth, source__startswith="chainlink:").count() == 1


def test_a_feed_read_is_cached_for_a_short_while(client, feednet):
    feed = new_feed(client)
    eth = coin(feednet, feed)
    usd_rate(eth)
    send_and_wait(
        client,
        {
            "from": funded_account(client),
            "to": feed,
            "data": call_data("setAnswer(int256)", ["int256"], [2600_00000000]),
        },
    )

    cached = usd_rate(eth)
    cache.clear()
    read_again = usd_rate(eth)

    assert (cached.usd_per_unit, read_again.usd_per_unit) == (Decimal("2500.12345678"), Decimal("2600"))


def test_a_stale_feed_falls_back_to_a_fresh_staff_rate(client, feednet):
    feed = new_feed(client)
    eth = coin(feednet, feed)
    set_round(client, feed, updated_at=int(time.time()) - HEARTBEAT - HEARTBEAT_GRACE_SECONDS - 30)
    staff_rate(eth, "2000")

    assert usd_rate(eth).usd_per_unit == Decimal("2000")


def test_a_stale_feed_with_no_staff_rate_is_refused(client, feednet):
    feed = new_feed(client)
    eth = coin(feednet, feed)
    set_round(client, feed, updated_at=int(time.time()) - HEARTBEAT - HEARTBEAT_GRACE_SECONDS - 30)

    with pytest.raises(QuoteError) as refused:
        usd_rate(eth)
    assert str(refused.value) == NO_PRICE


def test_an_answer_recorded_from_the_feed_is_not_taken_for_a_staff_rate_once_the_feed_is_stale(client, feednet):
    feed = new_feed(client)
    eth = coin(feednet, feed)
    usd_rate(eth)  # records the fresh answer as a Rate row
    set_round(client, feed, round_id=8, updated_at=int(time.time()) - HEARTBEAT - HEARTBEAT_GRACE_SECONDS - 30)

    with pytest.raises(QuoteError):
        usd_rate(eth, now=timezone.now())


@pytest.mark.parametrize(
    "round_data",
    [
        pytest.param({"round_id": 9, "answered": 8}, id="answered-in-an-earlier-round"),
        pytest.param({"updated_at": 0}, id="never-updated"),
        pytest.param({"answer": 0}, id="zero"),
        pytest.param({"answer": -2500_00000000}, id="negative"),
        pytest.param({"updated_at": int(time.time()) + 3600}, id="from-the-future"),
    ],
)
def test_an_incomplete_round_or_a_non_positive_answer_is_refused(client, feednet, round_data):
    feed = new_feed(client)
    eth = coin(feednet, feed)
    set_round(client, feed, **round_data)

    with pytest.raises(QuoteError) as refused:
        usd_rate(eth)
    assert str(refused.value) == NO_PRICE
    assert not Rate.objects.filter(asset=eth).exists()


def test_a_feed_address_with_no_code_is_refused_and_the_staff_rate_used(client, feednet):
    eth = coin(feednet, "0x000000000000000000000000000000000000dEaD")
    assert client.call("eth_call", [{"to": eth.price_feed, "data": "0xfeaf968c"}, "latest"]) == "0x"

    with pytest.raises(QuoteError):
        usd_rate(eth)
    staff_rate(eth, "2100")
    assert usd_rate(eth).usd_per_unit == Decimal("2100")


def test_a_contract_that_is_no_feed_reverts_and_is_refused(client, feednet):
    not_a_feed = deploy_token(client, name="Not a feed", symbol="NAF", decimals=6)
    eth = coin(feednet, not_a_feed)

    with pytest.raises(QuoteError) as refused:
        usd_rate(eth)
    assert str(refused.value) == NO_PRICE


def test_a_network_whose_rpc_is_down_refuses_the_feed_like_any_other_fault(
    client, feednet, monkeypatch, closed_rpc_url
):
    eth = coin(feednet, new_feed(client))
    monkeypatch.setenv("CHAIN_RPC_URLS_FEEDNET", closed_rpc_url)

    with pytest.raises(QuoteError):
        usd_rate(eth)


def test_devnet_setup_deploys_a_feed_for_the_local_coin_once_at_the_fixed_development_rate(client, monkeypatch):
    node = Anvil()  # a fresh chain of its own: setup deploys the test tokens there too
    try:
        monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", node.url)
        first = devnet_setup(client=RpcClient([node.url]))
        second = devnet_setup(client=RpcClient([node.url]))
        eth = Asset.objects.select_related("network").get(network__slug="local", symbol="ETH")
        rate = usd_rate(eth)
    finally:
        node.stop()

    assert first[-1] == f"ETH price feed: deployed at {eth.price_feed}"
    assert second[-1] == f"ETH price feed: present at {eth.price_feed}"
    assert rate.usd_per_unit == Decimal("3000")  # DEV_NATIVE_USD_RATE, now read from the chain
    assert Rate.objects.get(asset=eth).source == f"chainlink:{eth.price_feed}"


def test_the_local_coin_is_quoted_from_its_development_feed(client):
    devnet_setup(client=client)
    eth = Asset.objects.select_related("network").get(network__slug="local", symbol="ETH")
    set_round(client, eth.price_feed, answer=3100_00000000)

    rate = usd_rate(eth)

    assert rate.usd_per_unit == Decimal("3100")
    assert Rate.objects.get(asset=eth).source == f"chainlink:{eth.price_feed}"


def test_the_mainnet_coins_have_their_feeds(db):
    feeds = dict(
        Asset.objects.filter(contract__isnull=True, price_feed__isnull=False).values_list("network__slug", "price_feed")
    )
    assert feeds == {
        "ethereum": "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419",
        "arbitrum": "0x639Fe6ab55C921f74e7fac1ee960C0B6293ba612",
        "base": "0x71041dddad3595F9CEd3DcCFBe3D1F4b0a16Bb70",
        "optimism": "0x13e3Ee699D1909E989722E753853AE30b17e08c5",
        "polygon": "0xAB594600376Ec9fD91F8e885dADF0CE036862dE0",
        "bsc": "0x0567F2323251f0Aab15c8dFb1967E4e8A7D42aeE",
    }


def test_a_coin_priced_by_its_feed_alone_is_offered_only_while_the_feed_answers(client, feednet):
    feed = new_feed(client)
    eth = coin(feednet, feed)

    offered_while_fresh = [asset.symbol for asset in offered_assets("feednet")]
    set_round(client, feed, updated_at=int(time.time()) - HEARTBEAT - HEARTBEAT_GRACE_SECONDS - 30)
    offered_when_stale = [asset.symbol for asset in offered_assets("feednet")]
    staff_rate(eth, "2000")
    offered_with_a_staff_rate = [asset.symbol for asset in offered_assets("feednet")]

    assert (offered_while_fresh, offered_when_stale, offered_with_a_staff_rate) == (["ETH"], [], ["ETH"])


def offered_assets(slug: str) -> list[Asset]:
    network = next((network for network in networks_offered() if network.slug == slug), None)
    return [] if network is None else network.offered_assets


def uptime_feed(client: RpcClient, *, down: bool, since_seconds: int) -> str:
    """A Chainlink L2 sequencer uptime feed (answer 0: up, 1: down; startedAt: when that status began)."""
    feed = deploy_price_feed(client, decimals=0, description="L2 Sequencer Uptime Status Feed", answer=0)
    set_round(client, feed, round_id=3, answer=int(down), updated_at=int(time.time()) - since_seconds)
    return feed


@pytest.mark.parametrize(
    ("down", "since_seconds", "priced"),
    [
        (True, 7200, False),  # the sequencer is down: the L2's feeds are not updated, whatever their age says
        (False, 600, False),  # up again ten minutes ago: within the hour's grace, answers may still be catching up
        (False, 7200, True),  # up for two hours: the price counts
    ],
)
def test_an_l2_coin_is_priced_from_its_feed_only_while_the_sequencer_is_up_past_its_grace(
    client, feednet, down, since_seconds, priced
):
    # Given an L2 whose coin has a fresh feed, and the L2's sequencer uptime feed
    feednet.sequencer_uptime_feed = uptime_feed(client, down=down, since_seconds=since_seconds)
    feednet.save(update_fields=["sequencer_uptime_feed"])
    eth = coin(feednet, new_feed(client))
    cache.clear()

    # When the coin is quoted
    if priced:
        assert usd_rate(eth).usd_per_unit == Decimal("2500.12345678")
    else:
        with pytest.raises(QuoteError, match="no up-to-date price"):
            usd_rate(eth)
        # And a staff rate still takes over, as for any refused feed
        staff_rate(eth, "2000")
        assert usd_rate(eth).usd_per_unit == Decimal("2000")


def test_the_l2_mainnets_have_their_sequencer_uptime_feeds(db):
    feeds = dict(Network.objects.exclude(sequencer_uptime_feed="").values_list("slug", "sequencer_uptime_feed"))
    assert feeds == {
        "arbitrum": "0xFdB631F5EE196F0ed6FAa767959853A9F217697D",
        "base": "0xBCF85224fc0756B9Fa45aA7892530B47e10b6433",
        "optimism": "0x371EAD81c9102C9BF4874A9075FFFf170F2Ee389",
    }

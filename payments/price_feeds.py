"""A native coin's USD price read at quote time from its network's Chainlink aggregator (AggregatorV3Interface).

Read through the shop's own RPC providers (two eth_calls in one request), cached for a short while, and refused
unless its round is complete, its answer positive and younger than the feed's heartbeat. On an L2 with a
sequencer uptime feed (`Network.sequencer_uptime_feed`), also refused while the sequencer is down and for an
hour after it came back: its price feeds are not updated meanwhile, however fresh their last answer looks.
A refusal is never an exception: the caller falls back to a staff rate, then to the existing refusal. An accepted
answer is recorded as a Rate row (source "chainlink:<address>"), once per round, so that every quote can be traced
to it.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from decimal import Decimal

from django.core.cache import cache
from eth_abi import decode
from eth_abi.exceptions import DecodingError
from eth_utils import function_signature_to_4byte_selector

from payments.models import Asset, Network, Rate
from payments.rpc import RpcClient, RpcError
from payments.rpc_config import rpc_client

log = logging.getLogger(__name__)

SOURCE_PREFIX = "chainlink:"
FEED_CACHE_SECONDS = 30
# Chainlink: once the heartbeat starts a round, the answer can take about 40 s more to land on chain.
HEARTBEAT_GRACE_SECONDS = 60
# A chain's clock a little ahead of ours is normal; an answer from further in the future is garbage.
FUTURE_SKEW_SECONDS = 300
MAX_FEED_DECIMALS = 36
# Chainlink's advice for sequencer uptime feeds: wait this long after the sequencer is back before trusting prices.
SEQUENCER_GRACE_SECONDS = 3600
RATE_PLACES = Decimal("0.00000001")  # Rate.usd_per_unit keeps 8 decimal places, up to 16 digits before them
RATE_LIMIT = Decimal(10) ** 16

DECIMALS_CALL = "0x" + function_signature_to_4byte_selector("decimals()").hex()
LATEST_ROUND_CALL = "0x" + function_signature_to_4byte_selector("latestRoundData()").hex()


class FeedRefused(Exception):
    """The feed gave no answer a quote may use."""


@dataclass(frozen=True)
class FeedRound:
    decimals: int
    round_id: int
    answer: int
    started_at: int  # unix seconds; for a sequencer uptime feed, when its status began
    updated_at: int  # unix seconds
    answered_in_round: int


@dataclass(frozen=True)
class FeedPrice:
    usd_per_unit: Decimal
    as_of: dt.datetime


def _feed_client(network: Network) -> RpcClient:
    return rpc_client(network)


def feed_round_read(client: RpcClient, feed: str) -> FeedRound:
    """decimals() and latestRoundData(), decoded; FeedRefused for an RPC error, a revert, no code or garbage."""
    call = [{"to": feed, "data": DECIMALS_CALL}, "latest"], [{"to": feed, "data": LATEST_ROUND_CALL}, "latest"]
    try:
        raw_decimals, raw_round = client.batch([("eth_call", call[0]), ("eth_call", call[1])])
        (decimals,) = decode(["uint8"], bytes.fromhex(raw_decimals.removeprefix("0x")))
        round_id, answer, started_at, updated_at, answered_in_round = decode(
            ["uint80", "int256", "uint256", "uint256", "uint80"], bytes.fromhex(raw_round.removeprefix("0x"))
        )
    except (RpcError, DecodingError, ValueError, TypeError, AttributeError) as exc:
        raise FeedRefused(f"unreadable ({type(exc).__name__}: {str(exc)[:120]})") from None
    return FeedRound(decimals, round_id, answer, started_at, updated_at, answered_in_round)


def feed_price(feed_round: FeedRound, *, heartbeat_seconds: int, now: dt.datetime) -> FeedPrice:
    """The USD price of one unit, or FeedRefused: an incomplete round, an answer not positive, stale or garbage."""
    if feed_round.updated_at == 0 or feed_round.answered_in_round < feed_round.round_id:
        raise FeedRefused(f"round {feed_round.round_id} is incomplete")
    if feed_round.answer <= 0:
        raise FeedRefused(f"answer {feed_round.answer} is not positive")
    if feed_round.decimals > MAX_FEED_DECIMALS:
        raise FeedRefused(f"{feed_round.decimals} decimals")
    try:
        as_of = dt.datetime.fromtimestamp(feed_round.updated_at, tz=dt.UTC)
    except (OverflowError, ValueError, OSError):
        raise FeedRefused(f"updatedAt {feed_round.updated_at} is no time") from None
    age = (now - as_of).total_seconds()
    if age > heartbeat_seconds + HEARTBEAT_GRACE_SECONDS:
        raise FeedRefused(f"answer is {int(age)} s old, heartbeat {heartbeat_seconds} s")
    if age < -FUTURE_SKEW_SECONDS:
        raise FeedRefused(f"answer is dated {int(-age)} s in the future")
    usd = Decimal(feed_round.answer).scaleb(-feed_round.decimals).quantize(RATE_PLACES)
    if not Decimal(0) < usd < RATE_LIMIT:
        raise FeedRefused(f"answer {feed_round.answer} is out of range")
    return FeedPrice(usd, as_of)


def sequencer_up(status: FeedRound, *, now: dt.datetime) -> None:
    """FeedRefused unless the L2's sequencer is up (answer 0) and has been for SEQUENCER_GRACE_SECONDS.
    Its age is no test: an uptime feed is written only when the status changes."""
    if status.started_at == 0:
        raise FeedRefused("the sequencer uptime feed's round is not initialised")
    if status.answer != 0:
        raise FeedRefused("the network's sequencer is down")
    up_for = now.timestamp() - status.started_at
    if up_for < SEQUENCER_GRACE_SECONDS:
        raise FeedRefused(f"the sequencer is back for {int(up_for)} s only, grace {SEQUENCER_GRACE_SECONDS} s")


def _cached_round(network: Network, feed: str) -> FeedRound | str:
    """The feed's latest round, or why it could not be read: either kept FEED_CACHE_SECONDS, so that quotes stay
    cheap and a failing feed is not asked again at every quote."""
    key = f"price-feed:{network.chain_id}:{feed.lower()}"
    found: FeedRound | str | None = cache.get(key)
    if found is None:
        try:
            found = feed_round_read(_feed_client(network), feed)
        except (FeedRefused, RpcError) as exc:  # RpcError: no RPC URL configured
            found = str(exc) or type(exc).__name__
        cache.set(key, found, FEED_CACHE_SECONDS)
    return found


def _read(network: Network, feed: str) -> FeedRound:
    found = _cached_round(network, feed)
    if isinstance(found, str):
        raise FeedRefused(found)
    return found


def feed_rate(asset: Asset, *, now: dt.datetime) -> FeedPrice | None:
    """The asset's price from its feed, recorded as a Rate row; None (logged) without a feed or with a refusal."""
    if not asset.price_feed:
        return None
    network = asset.network
    try:
        if network.sequencer_uptime_feed:
            sequencer_up(_read(network, network.sequencer_uptime_feed), now=now)
        found = _read(network, asset.price_feed)
        price = feed_price(found, heartbeat_seconds=asset.price_feed_heartbeat_seconds, now=now)
    except FeedRefused as exc:
        log.warning("price feed %s of %s refused: %s", asset.price_feed, asset, exc)
        return None
    Rate.objects.get_or_create(
        asset=asset,
        source=SOURCE_PREFIX + asset.price_feed,
        as_of=price.as_of,
        defaults={"usd_per_unit": price.usd_per_unit},
    )
    return price

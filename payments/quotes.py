"""Quotes: a USD total turned into an exact amount of an asset, in base units, frozen with its rate."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from payments.fields import format_units as format_units  # `as`: re-exported, part of this module's interface
from payments.models import Asset, Rate
from payments.price_feeds import SOURCE_PREFIX, feed_rate


class QuoteError(Exception):
    """The asset cannot be quoted now; the message tells the customer what to do."""


@dataclass(frozen=True)
class UsdRate:
    usd_per_unit: Decimal
    as_of: dt.datetime | None  # None for a stablecoin priced 1:1


def fresh_rate_cutoff(now: dt.datetime) -> dt.datetime:
    return now - dt.timedelta(seconds=settings.RATE_MAX_AGE_SECONDS)


def usd_rate(asset: Asset, *, now: dt.datetime | None = None) -> UsdRate:
    """1 for stablecoins; else the asset's price feed if it answers acceptably; else the latest staff rate if fresh;
    the fixed rate on a development chain."""
    now = now or timezone.now()
    if asset.usd_stable:
        return UsdRate(Decimal(1), None)
    from_feed = feed_rate(asset, now=now)
    if from_feed is not None:
        return UsdRate(from_feed.usd_per_unit, from_feed.as_of)
    # A recorded feed answer is no staff rate: the feed's own heartbeat, not RATE_MAX_AGE_SECONDS, bounds its age.
    staff = Rate.objects.exclude(source__startswith=SOURCE_PREFIX)
    rate = staff.filter(asset=asset, as_of__gte=fresh_rate_cutoff(now), usd_per_unit__gt=0).first()
    if rate is not None:
        return UsdRate(rate.usd_per_unit, rate.as_of)
    if asset.network.is_development:
        return UsdRate(Decimal(settings.DEV_NATIVE_USD_RATE), now)
    raise QuoteError(
        _("There is no up-to-date price for %(symbol)s right now: choose a stablecoin or try again later.")
        % {"symbol": asset.symbol}
    )


def to_base_units(usd: Decimal, rate: UsdRate, decimals: int) -> int:
    """Exact; rounded up so that the quote never falls short of the price."""
    with localcontext() as ctx:
        ctx.prec = 100
        units = (usd / rate.usd_per_unit).scaleb(decimals)
        return int(units.to_integral_value(rounding=ROUND_CEILING))


def eip681_uri(*, contract: str | None, chain_id: int, address: str, base_units: int) -> str:
    """A payment link wallets understand (EIP-681); a convenience, never the only instruction."""
    if contract is None:
        return f"ethereum:{address}@{chain_id}?value={base_units}"
    return f"ethereum:{contract}@{chain_id}/transfer?address={address}&uint256={base_units}"

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


# A quote in a coin priced by a rate (a native coin, anything not 1:1 with the USD) is rounded up to this many
# significant digits: 0.299667 ETH, not 0.299666666666666667 ETH, which many wallets and exchanges cannot send
# exactly. Up, so that it never falls short of the price: the customer pays at most one unit of the sixth digit
# more (under 0.001 % of the price, 0.01 USD on 899 USD). A stablecoin priced 1:1 keeps every cent.
QUOTE_SIGNIFICANT_DIGITS = 6


def to_base_units(usd: Decimal, rate: UsdRate, decimals: int) -> int:
    """The quote in base units, never short of the price: exact for a stablecoin priced 1:1 (899.00 USD is 899
    USDC); else the exact amount rounded up to QUOTE_SIGNIFICANT_DIGITS significant digits, with no more decimals
    than the asset has (then rounded up to the next base unit)."""
    with localcontext() as ctx:
        ctx.prec = 100
        exact = usd / rate.usd_per_unit
        if rate.usd_per_unit == 1 or exact <= 0:
            step = Decimal(1).scaleb(-decimals)
        else:
            step = Decimal(1).scaleb(max(exact.adjusted() - QUOTE_SIGNIFICANT_DIGITS + 1, -decimals))
        rounded = (exact / step).to_integral_value(rounding=ROUND_CEILING) * step
        return int(rounded.scaleb(decimals))


def eip681_uri(*, contract: str | None, chain_id: int, address: str, base_units: int) -> str:
    """A payment link wallets understand (EIP-681); a convenience, never the only instruction."""
    if contract is None:
        return f"ethereum:{address}@{chain_id}?value={base_units}"
    return f"ethereum:{contract}@{chain_id}/transfer?address={address}&uint256={base_units}"

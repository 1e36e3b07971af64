"""Token amounts: base units (the integers a chain counts) shown as whole units."""

from __future__ import annotations

from decimal import Decimal


def format_units(base_units: int | Decimal, decimals: int) -> str:
    """Base units as an exact decimal string in whole units: 1500000 with 6 decimals -> '1.5'.

    Integer arithmetic only: Decimal's default 28-digit context would round a uint256 amount."""
    units = int(base_units)
    sign, units = ("-" if units < 0 else ""), abs(units)
    whole, fraction = divmod(units, 10**decimals)
    text = f"{sign}{whole}"
    if decimals and fraction:
        text += "." + str(fraction).rjust(decimals, "0").rstrip("0")
    return text


def units_text(base_units: int | Decimal, decimals: int, symbol: str) -> str:
    """An amount as staff read it: whole units with at least two decimals, then the symbol ('899.00 USDC',
    '0.0015 ETH'), exact (format_units), never base units alone."""
    text = format_units(base_units, decimals)
    if decimals >= 2:
        whole, _dot, fraction = text.partition(".")
        text = f"{whole}.{fraction.ljust(2, '0')}"
    return f"{text} {symbol}".strip()

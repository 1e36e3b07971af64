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

"""Integer amounts in an asset's base units (wei, token units), up to 2**256, exact in every database."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.db import models


class BaseUnitsField(models.Field):
    """NUMERIC(78, 0) on PostgreSQL; text on SQLite, whose decimals keep only 15 significant digits
    (a wei amount read back from a SQLite decimal column comes back rounded)."""

    description = "An integer amount in an asset's base units"

    def db_type(self, connection) -> str:
        return "text" if connection.vendor == "sqlite" else "numeric(78, 0)"

    def get_internal_type(self) -> str:
        return "BaseUnitsField"

    def to_python(self, value) -> Decimal | None:
        if value is None or value == "":
            return None
        return Decimal(int(Decimal(value)))

    def from_db_value(self, value, expression, connection) -> Decimal | None:
        return self.to_python(value)

    def get_prep_value(self, value) -> Decimal | None:
        return self.to_python(value)

    def get_db_prep_value(self, value, connection, prepared: bool = False):
        value = value if prepared else self.get_prep_value(value)
        if value is not None and connection.vendor == "sqlite":
            return str(int(value))
        return value

    def formfield(self, **kwargs):
        return super().formfield(**{"form_class": forms.DecimalField, "decimal_places": 0, **kwargs})


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

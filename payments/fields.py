"""Integer amounts in an asset's base units (wei, token units), up to 2**256, exact."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from core.amounts import format_units as format_units  # `as`: re-exported, payments code names it here


class BaseUnitsField(models.Field):
    """NUMERIC(78, 0): exact to 78 digits, room for any 256-bit amount."""

    description = "An integer amount in an asset's base units"

    def db_type(self, connection: BaseDatabaseWrapper) -> str:
        return "numeric(78, 0)"

    def get_internal_type(self) -> str:
        return "BaseUnitsField"

    def to_python(self, value: Any) -> Decimal | None:
        if value is None or value == "":
            return None
        return Decimal(int(Decimal(value)))

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Decimal | None:
        return self.to_python(value)

    def get_prep_value(self, value: Any) -> Decimal | None:
        return self.to_python(value)

    def formfield(
        self,
        form_class: type[forms.Field] | None = None,
        choices_form_class: type[forms.ChoiceField] | None = None,
        **kwargs: Any,
    ) -> forms.Field | None:
        return super().formfield(
            form_class=forms.DecimalField if form_class is None else form_class,
            choices_form_class=choices_form_class,
            **{"decimal_places": 0, **kwargs},
        )

"""Integer amounts in an asset's base units (wei, token units), up to 2**256, exact."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django import forms
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.expressions import Combinable

from core.amounts import format_units as format_units  # `as`: re-exported, payments code names it here

# For django-stubs a field is generic in what it takes (_ST) and gives back (_GT), as its own fields are; the mypy
# plugin fills them in from BaseUnitsField's _pyi_private_* below, with None where null=True.
_ST = TypeVar("_ST", contravariant=True)
_GT = TypeVar("_GT", covariant=True)

if TYPE_CHECKING:
    _Field = models.Field
else:

    class _Field(models.Field, Generic[_ST, _GT]):  # Django's own Field is not generic at run time
        pass


class BaseUnitsField(_Field[_ST, _GT]):
    """NUMERIC(78, 0): exact to 78 digits, room for any 256-bit amount."""

    # Read by the mypy plugin, as django-stubs' DecimalField has them.
    _pyi_private_set_type: Decimal | int | str | Combinable
    _pyi_private_get_type: Decimal

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

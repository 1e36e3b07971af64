"""Text fields for API input that take text only.

DRF's CharField quietly turns a JSON number into text (`"hypothesis": 0` is stored as "0"), although the
schema promises a string; these refuse anything that is not a JSON string, naming the field. The email field also
takes only what core.email_address accepts, and gives its normalised form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from core.email_address import EmailAddressInvalid, email_normalize

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


class TextOnlyMixin(serializers.CharField):
    """Put before a CharField (or one of its subclasses) in the bases: it checks the data is text first."""

    default_error_messages: ClassVar[dict[str, StrOrPromise]] = {
        "not_text": _("Send this field as text (a JSON string).")
    }

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_text")
        return super().to_internal_value(data)


class TextField(TextOnlyMixin, serializers.CharField):
    pass


class SlugTextField(TextOnlyMixin, serializers.SlugField):
    pass


class EmailTextField(TextOnlyMixin, serializers.EmailField):
    def to_internal_value(self, data: Any) -> str:
        try:
            return email_normalize(super().to_internal_value(data))
        except EmailAddressInvalid as exc:
            raise serializers.ValidationError(exc.message, code="invalid") from None

"""The admin login form: password, plus a TOTP code only for a user who has a confirmed device."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from axes.helpers import get_cool_off
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django_otp import user_has_device
from django_otp.forms import OTPAuthenticationForm
from django_otp.plugins.otp_totp.models import TOTPDevice

from core.ratelimit import too_many

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser
    from django_otp.models import Device


# django-otp ships no types (its names are Any: [[tool.mypy.overrides]] ignore_missing_imports), so its base is Any.
class OptionalOTPAuthenticationForm(OTPAuthenticationForm):  # type: ignore[misc]
    """OTPAuthenticationForm always wants a code; staff without a TOTPDevice log in with the password alone."""

    def clean_otp(self, user: AbstractBaseUser | None) -> None:
        if user is None or not user_has_device(user, confirmed=True):
            return
        super().clean_otp(user)

    def _chosen_device(self, user: AbstractBaseUser) -> Device | None:
        """The device picked in the form, else the user's first confirmed TOTP device (the admin shows no picker)."""
        return super()._chosen_device(user) or TOTPDevice.objects.devices_for_user(user, confirmed=True).first()


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Mapping[str, object] | None = None
) -> HttpResponse:
    """django-axes' lockout as the site's own translated 429 page, with Retry-After set to the cool-off."""
    cool_off = get_cool_off(request)
    seconds = int(cool_off.total_seconds()) if cool_off else 900
    message = _("This login is locked after too many failed attempts. Please try again in %(minutes)s minutes.") % {
        "minutes": math.ceil(seconds / 60)
    }
    return too_many(request, seconds, message)

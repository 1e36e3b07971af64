"""The admin login form: password, plus a TOTP code only for a user who has a confirmed device."""

from __future__ import annotations

from django_otp import user_has_device
from django_otp.forms import OTPAuthenticationForm
from django_otp.plugins.otp_totp.models import TOTPDevice


class OptionalOTPAuthenticationForm(OTPAuthenticationForm):
    """OTPAuthenticationForm always wants a code; staff without a TOTPDevice log in with the password alone."""

    def clean_otp(self, user):
        if user is None or not user_has_device(user, confirmed=True):
            return
        super().clean_otp(user)

    def _chosen_device(self, user):
        """The device picked in the form, else the user's first confirmed TOTP device (the admin shows no picker)."""
        return super()._chosen_device(user) or TOTPDevice.objects.devices_for_user(user, confirmed=True).first()

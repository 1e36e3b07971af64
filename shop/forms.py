"""The order wizard's forms, one per step. Business checks are shop.order_input's, shared with the API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django import forms
from django.core.exceptions import ValidationError
from django.utils.datastructures import MultiValueDict
from django.utils.translation import gettext_lazy as _

from core.email_address import EmailAddressInvalid, email_normalize
from core.input_errors import OrderInputError
from core.money_text import amount_l10n
from orders.models import Duration, HypothesisKind, Preparation
from orders.sshkeys import MAX_KEY_CHARS, looks_like_private_key
from payments.models import Network
from shop.order_input import (
    MAX_LOTS_PER_ORDER,
    check_lots,
    parse_key,
    resolve_asset,
    resolve_duration,
    resolve_preparation,
)

CheckArgs = ParamSpec("CheckArgs")
Checked = TypeVar("Checked")


def _choice_field(form: forms.BaseForm, name: str) -> forms.ChoiceField:
    """The form's field `name`, a ChoiceField (form.fields is typed with plain Fields, which have no choices)."""
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField), name
    return field


class InputCheckMixin:
    """Run a shop.order_input check and put its message on the form field."""

    def run_check(
        self, check: Callable[CheckArgs, Checked], *args: CheckArgs.args, **kwargs: CheckArgs.kwargs
    ) -> Checked:
        try:
            return check(*args, **kwargs)
        except OrderInputError as exc:
            raise forms.ValidationError(exc.message) from None


class EmailAddressField(forms.EmailField):
    """An address as core.email_address accepts it, cleaned to its normalised form (the one stored)."""

    default_validators = []  # email_normalize runs Django's check itself, on the ASCII form

    def clean(self, value: str) -> str:
        value = super().clean(value)
        if value in self.empty_values:
            return value
        try:
            return email_normalize(value)
        except EmailAddressInvalid as exc:
            raise ValidationError(exc.message, code="invalid") from None


class ConfigureForm(InputCheckMixin, forms.Form):
    lots = forms.IntegerField(label=_("Lots (2 cards each)"), min_value=1, max_value=MAX_LOTS_PER_ORDER, initial=1)
    duration_days = forms.TypedChoiceField(label=_("Duration"), coerce=int, widget=forms.RadioSelect)
    preparation = forms.ChoiceField(label=_("Preparation"), widget=forms.RadioSelect)

    def __init__(self, *args: Any, durations: list[Duration], preparations: list[Preparation], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "duration_days").choices = [
            (d.days, _("%(days)s days") % {"days": d.days}) for d in durations
        ]
        _choice_field(self, "preparation").choices = [(p.slug, p.name) for p in preparations]

    def clean_lots(self) -> int:
        return self.run_check(check_lots, self.cleaned_data["lots"])

    def clean_duration_days(self) -> int:
        days: int = self.cleaned_data["duration_days"]
        self.run_check(resolve_duration, days)
        return days

    def clean_preparation(self) -> str:
        slug: str = self.cleaned_data["preparation"]
        self.run_check(resolve_preparation, slug)
        return slug


class ContactForm(InputCheckMixin, forms.Form):
    first_name = forms.CharField(
        label=_("First name"), max_length=100, widget=forms.TextInput(attrs={"autocomplete": "given-name"})
    )
    last_name = forms.CharField(
        label=_("Last name(s)"), max_length=150, widget=forms.TextInput(attrs={"autocomplete": "family-name"})
    )
    email = EmailAddressField(
        label=_("Email"), max_length=254, widget=forms.EmailInput(attrs={"autocomplete": "email"})
    )
    ssh_public_key = forms.CharField(
        label=_("SSH public key"),
        max_length=MAX_KEY_CHARS,
        help_text=_("The contents of your .pub file, for example ~/.ssh/id_ed25519.pub. Access will use it."),
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "autocapitalize": "off"}),
    )
    hypothesis_kind = forms.ChoiceField(
        label=_("What do you expect the two cards to give you?"),
        required=False,
        choices=[("", _("No particular hypothesis"))] + list(HypothesisKind.choices),
        widget=forms.RadioSelect,
    )
    hypothesis = forms.CharField(
        label=_("Your hypothesis, in your words (optional)"),
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    terms = forms.BooleanField(
        label=_(
            "I accept the terms of rental: access is handed over after the payment is confirmed and the "
            "node passes its preflight, for the chosen duration from that moment."
        ),
        error_messages={"required": _("Accept the terms to continue.")},
    )

    def clean_ssh_public_key(self) -> str:
        return self.run_check(parse_key, self.cleaned_data["ssh_public_key"]).line

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        name = self.add_prefix("ssh_public_key")
        if looks_like_private_key(self.data.get(name)):
            # The page is shown again with the error: it must not carry the private key back to the browser.
            # A request's QueryDict copies as a mutable QueryDict (each key's list of values kept); a dict as a dict.
            data = self.data
            copied = data.copy() if isinstance(data, MultiValueDict) else dict(data)
            copied[name] = ""
            self.data = copied
        return cleaned


def _offer_payment_options(field: forms.ChoiceField, networks: list[Network]) -> None:
    """Each offered asset on each network as a choice `<network>:<symbol>`, for the order's payment and an
    extension's alike."""
    field.choices = [
        (f"{network.slug}:{asset.symbol}", f"{asset.symbol} · {network.name}")
        for network in networks
        for asset in network.offered_assets
    ]
    field.error_messages["invalid_choice"] = _("Choose one of the listed assets and networks.")


class PaymentForm(InputCheckMixin, forms.Form):
    payment_option = forms.ChoiceField(label=_("Asset and network"), widget=forms.RadioSelect)

    def __init__(self, *args: Any, networks: list[Network], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _offer_payment_options(_choice_field(self, "payment_option"), networks)

    def clean_payment_option(self) -> str:
        option: str = self.cleaned_data["payment_option"]
        network, _sep, symbol = option.partition(":")
        self.run_check(resolve_asset, network, symbol)
        return option


class ExtendForm(InputCheckMixin, forms.Form):
    """More days for an active rental, paid in the asset chosen (the order's by default)."""

    duration_days = forms.TypedChoiceField(label=_("More days"), coerce=int, widget=forms.RadioSelect)
    payment_option = forms.ChoiceField(label=_("Asset and network"))

    def __init__(self, *args: Any, durations: list[Duration], networks: list[Network], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "duration_days").choices = [
            (
                d.days,
                _("%(days)s days, %(usd)s USD per lot") % {"days": d.days, "usd": amount_l10n(d.price_per_lot_usd, 2)},
            )
            for d in durations
        ]
        _offer_payment_options(_choice_field(self, "payment_option"), networks)


class KeyReplaceForm(forms.Form):
    """The order page's "Replace SSH key": the new key, checked as the order form checks it
    (orders/key_change.py puts the message on this field)."""

    ssh_public_key = forms.CharField(
        label=_("New SSH public key"),
        max_length=MAX_KEY_CHARS,
        help_text=_("The contents of your new .pub file, for example ~/.ssh/id_ed25519.pub, on one line."),
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "autocapitalize": "off", "autocomplete": "off"}),
    )

    def forget_private_key(self) -> None:
        """The page shown again with the error must not carry a pasted private key back to the browser."""
        if self.is_bound and looks_like_private_key(self.data.get("ssh_public_key")):
            self.data = {**self.data, "ssh_public_key": ""}


class PaidForm(forms.Form):
    """ "I have paid", with the transaction hash if the customer has it."""

    tx_hash = forms.CharField(
        label=_("Transaction hash (optional)"),
        required=False,
        max_length=200,
        help_text=_("0x followed by 64 hexadecimal characters, as your wallet or the explorer shows it."),
        widget=forms.TextInput(attrs={"spellcheck": "false", "autocomplete": "off", "autocapitalize": "off"}),
    )


class OrderFindForm(forms.Form):
    # Django's email check refuses line breaks (no header injection); the email is never sent to this text anyway,
    # only to the address stored with an order whose normalised address is the same.
    email = EmailAddressField(
        label=_("Email"),
        max_length=254,
        help_text=_("The email address you gave when you ordered."),
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )

"""Turning what a customer typed (form or API) into an OrderRequest, with one message per bad field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec

from django.utils.translation import gettext as _

from core.email_address import EmailAddressInvalid, email_normalize
from core.input_errors import OrderInputError
from orders.capacity_shown import lots_available_recount, lots_available_shown
from orders.lot_messages import only_available_message
from orders.models import Duration, HypothesisKind, Preparation
from orders.sshkeys import SshKeyError, SshPublicKey, parse_ssh_public_key
from payments.models import Asset, Network
from shop.catalog import catalog_data
from shop.placement import OrderRequest

MAX_LOTS_PER_ORDER = 64
CheckArgs = ParamSpec("CheckArgs")  # the arguments of a check, passed on to it as they are


class OrderInputErrors(Exception):
    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(errors)
        self.errors = errors


def check_lots(lots: int) -> int:
    if lots < 1:
        raise OrderInputError("lots", _("Order at least one lot."))
    # The shown count (seconds old) lets an order through to placement, which counts again under the node
    # locks and refuses what capacity refuses; a refusal here is always counted afresh.
    if lots <= lots_available_shown():
        return lots
    available = lots_available_recount()
    if lots > available:
        raise OrderInputError("lots", only_available_message(available))
    return lots


def resolve_duration(days: int) -> Duration:
    durations = catalog_data().durations
    duration = next((d for d in durations if d.days == days), None)
    if duration is None:
        offered = ", ".join(str(d.days) for d in durations)
        raise OrderInputError("duration_days", _("Choose a duration of %(days)s days.") % {"days": offered})
    return duration


def resolve_preparation(slug: str) -> Preparation:
    preparation = next((p for p in catalog_data().preparations if p.slug == slug), None)
    if preparation is None:
        raise OrderInputError("preparation", _("Choose one of the listed preparations."))
    return preparation


def resolve_network(network_slug: str) -> Network:
    networks = {network.slug: network for network in catalog_data().networks}
    network = networks.get(network_slug)
    if network is None:
        raise OrderInputError(
            "network", _("This network is not offered: choose one of %(list)s.") % {"list": ", ".join(networks)}
        )
    return network


def resolve_asset(network_slug: str, symbol: str) -> Asset:
    network = resolve_network(network_slug)
    for asset in network.offered_assets:
        if asset.symbol.upper() == (symbol or "").upper():
            asset.network = network
            return asset
    symbols = ", ".join(asset.symbol for asset in network.offered_assets)
    raise OrderInputError(
        "asset",
        _("%(symbol)s is not accepted on %(network)s: choose one of %(list)s.")
        % {"symbol": symbol, "network": network.name, "list": symbols},
    )


def parse_key(text: str) -> SshPublicKey:
    try:
        return parse_ssh_public_key(text)
    except SshKeyError as exc:
        raise OrderInputError("ssh_public_key", str(exc)) from None


def check_email(email: str) -> str:
    """The address in the form it is stored and compared in (core.email_address), or its field's message."""
    try:
        return email_normalize(email)
    except EmailAddressInvalid as exc:
        raise OrderInputError("email", exc.message) from None


def check_hypothesis_kind(kind: str) -> str:
    if kind and kind not in HypothesisKind.values:
        raise OrderInputError("hypothesis_kind", _("Choose one of the listed hypotheses."))
    return kind


def build_order_request(data: dict[str, Any], *, language: str) -> OrderRequest:
    """Every field checked, every problem reported at once (OrderInputErrors), or a request to place."""
    errors: dict[str, list[str]] = {}
    resolved: dict[str, Any] = {}

    def attempt(
        field: str, check: Callable[CheckArgs, object], *args: CheckArgs.args, **kwargs: CheckArgs.kwargs
    ) -> None:
        try:
            resolved[field] = check(*args, **kwargs)
        except OrderInputError as exc:
            errors.setdefault(exc.field, []).append(exc.message)

    attempt("lots", check_lots, data["lots"])
    attempt("duration", resolve_duration, data["duration_days"])
    attempt("preparation", resolve_preparation, data["preparation"])
    attempt("asset", resolve_asset, data["network"], data["asset"])
    attempt("key", parse_key, data["ssh_public_key"])
    attempt("email", check_email, data["email"])
    attempt("hypothesis_kind", check_hypothesis_kind, data.get("hypothesis_kind", ""))
    if errors:
        raise OrderInputErrors(errors)
    key: SshPublicKey = resolved["key"]
    return OrderRequest(
        lots=resolved["lots"],
        duration=resolved["duration"],
        preparation=resolved["preparation"],
        first_name=data["first_name"].strip(),
        last_name=data["last_name"].strip(),
        email=resolved["email"],
        ssh_public_key=key.line,
        ssh_key_fingerprint=key.fingerprint,
        asset=resolved["asset"],
        language=language[:2] if language else "en",
        hypothesis_kind=resolved["hypothesis_kind"],
        hypothesis_text=(data.get("hypothesis") or "").strip(),
        expected_total_usd=data.get("expected_total_usd"),
    )

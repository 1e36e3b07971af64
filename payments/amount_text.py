"""Amounts as staff read them (the admin, the console, needs attention): whole units with at least two decimals
and the symbol, '899.00 USDC' (core.amounts.units_text), never base units alone. Only a token the shop does not
sell, whose decimals nobody recorded, is written in base units, and then says which token."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Model, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Lower
from django.utils.translation import pgettext

from core.amounts import units_text
from payments.models import Asset, Credit, PaymentRequest, Refund

M = TypeVar("M", bound=Model)


def unknown_token_text(base_units: int, contract: str) -> str:
    words = pgettext("staff", "%(base_units)s base units of token %(contract)s")
    return words % {"base_units": int(base_units), "contract": contract or pgettext("staff", "(coin)")}


def payment_units_text(payment: PaymentRequest, base_units: Any) -> str:
    """An amount in the payment's own asset (its frozen decimals, its asset's symbol)."""
    return units_text(int(base_units), payment.decimals, payment.asset.symbol)


def credit_units_text(credit: Credit) -> str:
    if credit.asset is None:
        return unknown_token_text(int(credit.amount_base_units), credit.token_contract)
    return units_text(int(credit.amount_base_units), credit.asset.decimals, credit.asset.symbol)


def refund_units_text(refund: Refund) -> str:
    if refund.decimals is None:
        return unknown_token_text(int(refund.amount_base_units), refund.token_contract)
    return units_text(int(refund.amount_base_units), refund.decimals, refund.symbol)


def with_asset(queryset: QuerySet[M]) -> QuerySet[M]:
    """Rows with a `network` and a `token_contract` (sweeps, unexpected outflows), each annotated with the
    shop's asset for that token (`asset_symbol`, `asset_decimals`; None for a token it does not sell): in the
    same query, whatever the number of rows."""
    assets = Asset.objects.annotate(key=Lower(Coalesce("contract", Value("")))).filter(
        network=OuterRef("network"), key=Lower(OuterRef("token_contract"))
    )
    annotated: QuerySet[M] = queryset.annotate(
        asset_symbol=Subquery(assets.values("symbol")[:1]), asset_decimals=Subquery(assets.values("decimals")[:1])
    )
    return annotated


def movement_units_text(row: Any) -> str:
    """The amount of a row annotated by with_asset."""
    decimals = getattr(row, "asset_decimals", None)
    if decimals is None:
        return unknown_token_text(int(row.amount_base_units), row.token_contract)
    return units_text(int(row.amount_base_units), decimals, row.asset_symbol)


def due_text(entries: list[dict[str, Any]]) -> str:
    """A payment's refunds due (payments/refunds_due.py), each in its own asset: '2.50 USDC on local, ...'."""
    parts = []
    for entry in entries:
        if entry["decimals"] is None:
            amount = unknown_token_text(int(entry["base_units"]), entry["contract"])
        else:
            amount = units_text(int(entry["base_units"]), entry["decimals"], entry["asset"] or "")
        parts.append(pgettext("staff", "%(amount)s on %(network)s") % {"amount": amount, "network": entry["network"]})
    return ", ".join(parts) or pgettext("staff", "nothing")

"""The order's receipt: what was bought (the rental, then each applied extension), what paid for each on-chain,
the grand total per asset and in USD, what went back, and when.

A receipt exists once the order was paid: its payment settled (confirmed in full, or accepted by a reviewer),
or the order went on to be prepared. Before that there is nothing to show as paid.

One receipt per order, numbered "R-" and the order's reference (`receipt_number`): it is brought up to date as
extensions are applied and refunds sent, and keeps its number. It is shown in the language the customer chose
(`receipt_language`), amounts are written in that language's format, and times are `<time>` elements that the
page's script shows in the customer's own time zone (UTC, said so, without it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import TypedDict

from django.conf import settings
from django.http import HttpRequest
from django.utils.translation import get_supported_language_variant
from django.utils.translation.trans_real import parse_accept_lang_header

from orders.credit_lines import credit_summary
from orders.models import Extension, ExtensionStatus, Order, OrderStatus
from payments.fields import format_units
from payments.models import Credit, PaymentRequest, Refund

S = OrderStatus
# Statuses an order reaches only after its payment was settled (a reorg may have un-settled it since).
PAID_STATUSES = (S.PAID, S.PREPARING, S.PREPARATION_FAILED, S.ACTIVE, S.ENDED)


def receipt_available(order: Order) -> bool:
    payment = getattr(order, "payment", None)
    return order.status in PAID_STATUSES or (payment is not None and payment.settled_at is not None)


def receipt_number(order: Order) -> str:
    """The receipt's number: "R-" and the order's reference (R-B2-7KQ4-M9PX). Unique as the reference is, the
    same every time the receipt is opened or printed (extensions and refunds update the receipt, not its number),
    and nothing stored."""
    return f"R-{order.reference}"


def _language_named(code: str) -> str | None:
    try:
        return get_supported_language_variant(code)
    except LookupError:
        return None


def receipt_language(request: HttpRequest, order: Order) -> str:
    """The language the customer chose, as for every other page (LocaleMiddleware): the language switcher's
    cookie, else the first language of the browser's (Accept-Language) that the shop has. The order's language
    only where the request names none of the shop's languages (a mail client's bare request, a script)."""
    cookie = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME)
    if cookie and (language := _language_named(cookie)):
        return language
    for code, _quality in parse_accept_lang_header(request.headers.get("Accept-Language", "")):
        if code == "*":
            break
        if language := _language_named(code):
            return language
    return order.language


@dataclass(frozen=True)
class Transfer:
    """One on-chain transfer that paid the order: its amount exact, in whole units (the page writes it in the
    page's locale)."""

    tx_hash: str
    block_number: int
    amount: Decimal
    symbol: str
    explorer_url: str


@dataclass(frozen=True)
class AssetTotal:
    """What the order and its applied extensions were quoted in one asset (a token or coin on one network),
    added up exactly in base units."""

    symbol: str
    network: str
    amount: Decimal


def _explorer(network_url: str, tx_hash: str) -> str:
    return network_url.replace("{tx}", tx_hash) if network_url and tx_hash else ""


def _transfers(payment: PaymentRequest) -> list[Transfer]:
    """The counted transfers of the order's own asset (a wrong token is not a payment: it shows as a refund)."""
    credits = Credit.objects.counted().filter(payment=payment, asset=payment.asset).select_related("network")
    return [
        Transfer(
            tx_hash=credit.tx_hash,
            block_number=credit.block_number,
            amount=payment.whole_units(credit.amount_base_units),
            symbol=payment.asset.symbol,
            explorer_url=_explorer(credit.network.explorer_tx_url, credit.tx_hash),
        )
        for credit in credits
    ]


def _paid_at(order: Order, payment: PaymentRequest | None) -> dt.datetime | None:
    if payment is not None and payment.settled_at is not None:
        return payment.settled_at
    first = order.events.filter(to_status=S.PAID).order_by("created_at").first()
    return first.created_at if first else None


class AppliedExtension(TypedDict):
    extension: Extension
    payment: PaymentRequest
    transfers: list[Transfer]


def _extensions(order: Order) -> list[AppliedExtension]:
    """Each extension whose days were given, with the payment that bought them and its transfers."""
    applied = order.extensions.filter(status=ExtensionStatus.APPLIED).select_related("payment__asset__network")
    return [
        {"extension": extension, "payment": extension.payment, "transfers": _transfers(extension.payment)}
        for extension in applied.order_by("applied_at", "pk")
    ]


def _asset_totals(payments: list[PaymentRequest]) -> list[AssetTotal]:
    """The quoted amounts added up per asset, in the order the assets were first used; never a sum across assets."""
    units: dict[int, int] = {}
    first: dict[int, PaymentRequest] = {}
    for payment in payments:
        units[payment.asset_id] = units.get(payment.asset_id, 0) + int(payment.amount_base_units)
        first.setdefault(payment.asset_id, payment)
    return [
        AssetTotal(
            symbol=first[asset].asset.symbol,
            network=first[asset].asset.network.name,
            amount=first[asset].whole_units(total),
        )
        for asset, total in units.items()
    ]


def _refund_amount(refund: Refund) -> Decimal | None:
    """The refund in whole units; None for a token the shop does not know the decimals of (then its text)."""
    if refund.decimals is None:
        return None
    return Decimal(format_units(int(refund.amount_base_units), refund.decimals))


def order_receipt(order: Order) -> dict[str, object]:
    """Everything the receipt shows, read once; the customer's name and email only while they are kept."""
    payment = PaymentRequest.objects.select_related("asset__network").filter(order=order, extension=None).first()
    # Every payment's refunds: the rental's and its extensions'.
    refunds = list(Refund.objects.filter(payment__order=order).select_related("network").order_by("created_at"))
    extensions = _extensions(order)
    return {
        "number": receipt_number(order),
        "seller": {
            "name": settings.SELLER_NAME,
            "address": settings.SELLER_ADDRESS,
            "tax_id": settings.SELLER_TAX_ID,
        },
        "customer": None
        if order.personal_data_erased_at is not None
        else {"name": order.full_name, "email": order.email},
        "payment": payment,
        "transfers": _transfers(payment) if payment else [],
        "extensions": extensions,
        # The price of the rental and of every applied extension, and what each was quoted in
        "total_usd": order.total_usd + sum((item["extension"].total_usd for item in extensions), Decimal(0)),
        "asset_totals": _asset_totals(([payment] if payment else []) + [item["payment"] for item in extensions]),
        "refunds": [
            {
                "refund": refund,
                "amount": _refund_amount(refund),
                "explorer_url": _explorer(refund.network.explorer_tx_url, refund.tx_hash),
            }
            for refund in refunds
        ],
        "placed_at": order.created_at,
        "paid_at": _paid_at(order, payment),
        # Time given back for downtime or adjusted by staff: the end under "Access until" includes it
        "credits": credit_summary(order) if order.credits.exists() else None,
    }

"""The order's receipt: what was bought (the rental, then each applied extension), what paid for each on-chain,
what went back, and when.

A receipt exists once the order was paid: its payment settled (confirmed in full, or accepted by a reviewer),
or the order went on to be prepared. Before that there is nothing to show as paid.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings

from orders.models import ExtensionStatus, Order, OrderStatus
from payments.fields import format_units
from payments.models import Credit, PaymentRequest, Refund

S = OrderStatus
# Statuses an order reaches only after its payment was settled (a reorg may have un-settled it since).
PAID_STATUSES = (S.PAID, S.PREPARING, S.PREPARATION_FAILED, S.ACTIVE, S.ENDED)


def receipt_available(order: Order) -> bool:
    payment = getattr(order, "payment", None)
    return order.status in PAID_STATUSES or (payment is not None and payment.settled_at is not None)


@dataclass(frozen=True)
class Transfer:
    """One on-chain transfer that paid the order."""

    tx_hash: str
    block_number: int
    amount: str
    explorer_url: str


def _explorer(network_url: str, tx_hash: str) -> str:
    return network_url.replace("{tx}", tx_hash) if network_url and tx_hash else ""


def _transfers(payment: PaymentRequest) -> list[Transfer]:
    """The counted transfers of the order's own asset (a wrong token is not a payment: it shows as a refund)."""
    credits = Credit.objects.counted().filter(payment=payment, asset=payment.asset).select_related("network")
    return [
        Transfer(
            tx_hash=credit.tx_hash,
            block_number=credit.block_number,
            amount=f"{format_units(int(credit.amount_base_units), payment.decimals)} {payment.asset.symbol}",
            explorer_url=_explorer(credit.network.explorer_tx_url, credit.tx_hash),
        )
        for credit in credits
    ]


def _paid_at(order: Order, payment: PaymentRequest | None) -> dt.datetime | None:
    if payment is not None and payment.settled_at is not None:
        return payment.settled_at
    first = order.events.filter(to_status=S.PAID).order_by("created_at").first()
    return first.created_at if first else None


def _extensions(order: Order) -> list[dict]:
    """Each extension whose days were given, with the payment that bought them and its transfers."""
    applied = order.extensions.filter(status=ExtensionStatus.APPLIED).select_related("payment__asset__network")
    return [
        {"extension": extension, "payment": extension.payment, "transfers": _transfers(extension.payment)}
        for extension in applied.order_by("applied_at", "pk")
    ]


def order_receipt(order: Order) -> dict:
    """Everything the receipt shows, read once; the customer's name and email only while they are kept."""
    payment = PaymentRequest.objects.select_related("asset__network").filter(order=order, extension=None).first()
    # Every payment's refunds: the rental's and its extensions'.
    refunds = list(Refund.objects.filter(payment__order=order).select_related("network").order_by("created_at"))
    return {
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
        "extensions": _extensions(order),
        "refunds": [
            {
                "refund": refund,
                "explorer_url": _explorer(refund.network.explorer_tx_url, refund.tx_hash),
            }
            for refund in refunds
        ],
        "placed_at": order.created_at,
        "paid_at": _paid_at(order, payment),
    }

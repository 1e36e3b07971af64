"""A customer's contact data on request: exported as JSON, or erased while the payment evidence stays.

Erasure keeps what reviewers and accountants need (the reference, amounts, the payment request, credits,
notices and events: tx hashes and blocks are public chain data) and blanks who the customer was.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from orders.models import Order, OrderStatus
from orders.orders import order_note

# Access on a node uses the customer's SSH key and emails go to their address until the order is over.
ERASABLE_STATUSES = (OrderStatus.EXPIRED, OrderStatus.CANCELLED, OrderStatus.ENDED)
ERASED = "erased"


class ErasureRefused(Exception):
    """The order still needs the contact data; the message says what to do first."""


def order_personal_data_export(*, order: Order) -> dict[str, object]:
    """Everything the shop holds about the person behind an order, as one JSON-ready document."""
    payment = getattr(order, "payment", None)
    return {
        "reference": order.reference,
        "status": order.status,
        "created_at": order.created_at.isoformat(),
        "personal_data_erased_at": order.personal_data_erased_at and order.personal_data_erased_at.isoformat(),
        "contact": {
            "first_name": order.first_name,
            "last_name": order.last_name,
            "email": order.email,
            "language": order.language,
            "terms_accepted_at": order.terms_accepted_at.isoformat(),
        },
        "ssh_public_key": order.ssh_public_key,
        "ssh_key_fingerprint": order.ssh_key_fingerprint,
        "hypothesis": {"kind": order.hypothesis_kind, "text": order.hypothesis_text},
        "order": {
            "lots": order.lots,
            "duration_days": order.duration_days,
            "preparation": order.preparation.slug,
            "total_usd": str(order.total_usd),
            "active_since": order.active_since and order.active_since.isoformat(),
            "ends_at": order.ends_at and order.ends_at.isoformat(),
        },
        "payment": None
        if payment is None
        else {
            "network": payment.asset.network.slug,
            "asset": payment.asset.symbol,
            "address": payment.address,
            "amount_base_units": str(payment.amount_base_units),
            "status": payment.status,
            "notices": [
                {"at": notice.created_at.isoformat(), "tx_hash": notice.tx_hash, "language": notice.language}
                for notice in payment.notices.all()
            ],
            "credits": [
                {"tx_hash": credit.tx_hash, "block_number": credit.block_number, "sender": credit.sender}
                for credit in payment.credits.all()
            ],
        },
        "events": [
            {"at": event.created_at.isoformat(), "from": event.from_status, "to": event.to_status}
            for event in order.events.all()
        ],
    }


def order_personal_data_erase(*, order_id: int, actor: str, reason: str, now: dt.datetime | None = None) -> Order:
    """Blank the contact data of a finished order, once, with an event saying who and why."""
    if not reason.strip():
        raise ErasureRefused("Give the reason for the erasure (for example the customer's request).")
    now = now or timezone.now()
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=order_id)
        if order.personal_data_erased_at is not None:
            return order
        if order.status not in ERASABLE_STATUSES:
            raise ErasureRefused(
                f"{order.reference} is {order.status}: cancel it, or wait until it has ended, before erasing."
            )
        order.first_name = ERASED
        order.last_name = ERASED
        order.email = f"{ERASED}-{order.reference.lower()}@invalid"  # RFC 2606: never delivered
        order.ssh_public_key = ""
        order.hypothesis_text = ""
        order.personal_data_erased_at = now
        order.save(
            update_fields=[
                "first_name",
                "last_name",
                "email",
                "ssh_public_key",
                "hypothesis_text",
                "personal_data_erased_at",
                "updated_at",
            ]
        )
        order_note(order=order, actor=actor, reason=f"personal data erased: {reason.strip()}", now=now)
    return order

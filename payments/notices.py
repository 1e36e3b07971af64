""" "I have paid": the customer's notice. It triggers a check now; it is never proof of payment."""

from __future__ import annotations

import datetime as dt
import re

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from payments.models import Notice, PaymentRequest
from shop.models import Order, OrderStatus
from shop.orders import OrderInputError, order_transition

TX_HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")


def clean_tx_hash(value: str | None) -> str:
    value = (value or "").strip()
    if not value:
        return ""
    if not TX_HASH.match(value):
        raise OrderInputError(
            "tx_hash", _("A transaction hash is 0x followed by 64 hexadecimal characters; check what you pasted.")
        )
    return value.lower()


def payment_notice_submit(*, order: Order, tx_hash: str = "", language: str = "") -> Notice:
    """Store the notice, mark the order as reported (once), and check on commit. Repeating is harmless."""
    tx_hash = clean_tx_hash(tx_hash)
    with transaction.atomic():
        payment = PaymentRequest.objects.select_for_update().get(order_id=order.pk)
        notice = Notice.objects.create(payment=payment, tx_hash=tx_hash, language=language[:8])
        locked = Order.objects.select_for_update().get(pk=order.pk)
        if locked.status == OrderStatus.AWAITING_PAYMENT:
            order_transition(
                order=locked,
                to=OrderStatus.PAYMENT_REPORTED,
                actor="customer",
                reason="the customer pressed 'I have paid'" + (f" with {tx_hash}" if tx_hash else ""),
                now=timezone.now(),
            )

        from payments.tasks import notice_verify_task

        # robust: with the broker down the notice is kept, and the periodic scan finds the payment anyway.
        transaction.on_commit(lambda: notice_verify_task.delay(notice.pk), robust=True)
    return notice


def notices_to_recheck(*, now: dt.datetime, limit: int = 200) -> list[int]:
    """Notices with a tx hash that no check has seen yet: their enqueue was lost (the broker was down) or
    their check failed for good. The periodic scan sends them again; a second check credits nothing twice.

    Hash-less notices are left out: they only ask for a scan, which the periodic pass is.
    """
    grace = dt.timedelta(seconds=settings.NOTICE_RECHECK_AFTER_SECONDS)  # the on-commit enqueue may be in flight
    return list(
        Notice.objects.filter(
            checked_at__isnull=True,
            created_at__lte=now - grace,
            created_at__gte=now - dt.timedelta(days=settings.PAYMENT_WATCH_DAYS),
        )
        .exclude(tx_hash="")
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )

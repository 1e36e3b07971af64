""" "I have paid": the customer's notice. It triggers a check now; it is never proof of payment."""

from __future__ import annotations

import re

from django.db import transaction
from django.utils.translation import gettext as _

from core.input_errors import OrderInputError
from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from orders.models import ExtensionStatus, Order
from orders.payment_outcome import OrderPaymentOutcome, order_payment_outcome
from payments.models import Notice, PaymentRequest

NOTICE_VERIFY = JobKind.NOTICE_VERIFY
# Extensions whose money is still awaited: "I have paid" covers them.
EXTENSION_WAITING = (ExtensionStatus.AWAITING_PAYMENT, ExtensionStatus.PAYMENT_REPORTED)
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
    """Store the notice, mark the order as reported (once), and check on commit. Repeating is harmless.
    It covers the order's extensions too: each one still waiting for its money gets a notice of its own and
    is marked reported (once); one job checks them all. Returns the first payment's notice."""
    tx_hash = clean_tx_hash(tx_hash)
    reason = "the customer pressed 'I have paid'" + (f" with {tx_hash}" if tx_hash else "")
    with transaction.atomic():
        # Lock order: payments (first, then the extensions' by id), then the order.
        payment = PaymentRequest.objects.select_for_update().get(order_id=order.pk, extension=None)
        waiting = list(
            PaymentRequest.objects.select_for_update()
            .filter(order_id=order.pk, extension__status__in=EXTENSION_WAITING)
            .order_by("pk")
        )
        notice = Notice.objects.create(payment=payment, tx_hash=tx_hash, language=language[:8])
        order_payment_outcome(order_id=order.pk, outcome=OrderPaymentOutcome.REPORTED, actor="customer", reason=reason)
        more = []
        for extension_payment in waiting:
            extension_notice = Notice.objects.create(payment=extension_payment, tx_hash=tx_hash, language=language[:8])
            more.append(extension_notice.pk)
            order_payment_outcome(
                order_id=order.pk,
                outcome=OrderPaymentOutcome.REPORTED,
                actor="customer",
                reason=reason,
                extension_id=extension_payment.extension_id,
            )
        # One job per press, whatever it covers: a press costs one stored check, never one per item.
        # With the broker down the notices and their job are kept: beat sends the check once the broker is back.
        job_enqueue(NOTICE_VERIFY, notice_id=notice.pk, **({"more_notice_ids": more} if more else {}))
    return notice

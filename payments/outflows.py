"""Money leaving deposit addresses: each transfer out is an approved refund being paid, a sweep, or a leak.

The scan (payments/scan.py) finds transfers out in the requests it already makes: ERC-20 Transfer logs with a
watched address as `from` (topic1), in the same batch as the `to` (topic2) request; and, for the coin, the
top-level transactions `from` a watched address in the blocks it already reads (payments/native.py). A deposit
address is a plain account: only a transaction signed with its key moves its coin, and that transaction's
value is what left (its fee, gasUsed * effectiveGasPrice, is not an outflow and is never flagged).

- An exact match of an APPROVED refund of the payment (asset, `to_address`, amount): the refund is sent; it
  is confirmed by the network's finality rule (payments.reconfirm.is_final) and the customer is emailed, or
  goes back to approved if a reorg takes the transaction away.
- To the network's treasury (payments.networks.treasury_address): a Sweep, final by the same rule.
- Anything else: an UnexpectedOutflow, a `unexpected_outflow` payment event, the /ops/ console and an email
  to staff: someone holds the key, or the treasurer sent what nobody approved.

Every transfer is stored once, keyed (chain id, tx hash, log index) as credits are.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from orders.outbox import email_enqueue
from orders.staff_notices import staff_email_send, staff_notify, staff_recipients
from payments.books import payment_books_refresh
from payments.credits import Transfer
from payments.lifecycle import payment_note
from payments.models import Network, PaymentRequest, Refund, RefundStatus, Sweep, UnexpectedOutflow
from payments.networks import treasury_address
from payments.reconfirm import is_final as block_is_final
from payments.refunds import refund_transition
from payments.rpc import RpcClient, RpcUnavailable

log = logging.getLogger(__name__)

R = RefundStatus
ACTOR = "system"
ALERT_ROLES = ("operator", "treasurer")  # operators acknowledge it on /ops/; treasurers hold the keys
REFUND_SENT, SWEPT, UNEXPECTED = "refund_sent", "swept", "unexpected_outflow"


def _what(transfer: Transfer) -> str:
    asset = transfer.asset.symbol if transfer.asset else (f"token {transfer.token}" if transfer.token else "coin")
    return f"{transfer.amount} base units of {asset} to {transfer.recipient} in tx {transfer.tx_hash}"


def outflow_record(*, payment: PaymentRequest, transfer: Transfer, now: dt.datetime | None = None) -> str | None:
    """Classify and store one transfer out of the payment's address. Returns what was recorded now
    (REFUND_SENT, SWEPT, UNEXPECTED), or None when it was already known (a re-scan)."""
    if transfer.amount <= 0:
        return None
    now = now or timezone.now()
    network = transfer.network
    key = {"chain_id": network.chain_id, "tx_hash": transfer.tx_hash.lower(), "log_index": transfer.log_index}
    try:
        recorded = _classify(payment, transfer, key, now)
    except IntegrityError:  # a concurrent pass stored it first: recorded once either way
        return None
    if recorded:
        payment_books_refresh(payment_id=payment.pk)
    return recorded


def _classify(payment: PaymentRequest, transfer: Transfer, key: dict[str, Any], now: dt.datetime) -> str | None:
    network = transfer.network
    with transaction.atomic():
        # The payment's row lock first (as payments/settle.py), then its refunds: one pass at a time per address.
        payment = PaymentRequest.objects.select_for_update().get(pk=payment.pk)
        if _known(key, transfer):
            return None
        refund = _matching_refund(payment, transfer)
        if refund is not None:
            Refund.objects.filter(pk=refund.pk).update(tx_hash=key["tx_hash"], block_number=transfer.block_number)
            refund_transition(refund=refund, to=R.SENT, actor=ACTOR, reason=f"tx {key['tx_hash']}", now=now)
            payment_note(
                payment=payment, actor=ACTOR, now=now, reason=f"{REFUND_SENT}: refund {refund.pk}, {_what(transfer)}"
            )
            return REFUND_SENT
        treasury = treasury_address(network)
        if treasury and transfer.recipient == treasury:
            Sweep.objects.create(
                **key,
                payment=payment,
                network=network,
                token_contract=transfer.token,
                to_address=transfer.recipient,
                amount_base_units=transfer.amount,
                block_number=transfer.block_number,
                block_hash=transfer.block_hash,
                created_at=now,
            )
            payment_note(payment=payment, actor=ACTOR, now=now, reason=f"{SWEPT}: {_what(transfer)}")
            return SWEPT
        outflow = UnexpectedOutflow.objects.create(
            **key,
            payment=payment,
            network=network,
            token_contract=transfer.token,
            to_address=transfer.recipient,
            amount_base_units=transfer.amount,
            block_number=transfer.block_number,
            created_at=now,
        )
        payment_note(payment=payment, actor=ACTOR, now=now, reason=f"{UNEXPECTED}: {_what(transfer)}")
        outflow.payment, outflow.network = payment, network
        subject, body = outflow_alert_text(outflow)
        staff_notify(
            roles=ALERT_ROLES,
            extra=settings.STAFF_ALERT_EMAILS,
            subject=subject,
            body=body,
            link=reverse("provisioning:console"),
        )
        log.error("%s: unexpected outflow from %s: %s", network.slug, payment.address, _what(transfer))
        return UNEXPECTED


def _known(key: dict[str, Any], transfer: Transfer) -> bool:
    """Already recorded. A sweep seen again in another block (a reorg re-mined it) follows it there."""
    sweep = Sweep.objects.filter(**key).first()
    if sweep is not None:
        if sweep.removed_at is not None or sweep.block_hash != transfer.block_hash:
            Sweep.objects.filter(pk=sweep.pk).update(
                block_number=transfer.block_number, block_hash=transfer.block_hash, removed_at=None, final=False
            )
        return True
    if UnexpectedOutflow.objects.filter(**key).exists():
        return True
    return Refund.objects.filter(chain_id=key["chain_id"], tx_hash=key["tx_hash"]).exists()


def _matching_refund(payment: PaymentRequest, transfer: Transfer) -> Refund | None:
    """The oldest approved refund of this payment that the transfer pays exactly: same network and asset, the
    address the customer gave, the exact amount. Anything less exact is not a refund."""
    approved = payment.refunds.select_for_update().filter(status=R.APPROVED, chain_id=transfer.network.chain_id)
    for refund in approved.order_by("pk"):
        if (
            refund.token_contract.lower() == transfer.token
            and refund.to_address.lower() == transfer.recipient
            and int(refund.amount_base_units) == transfer.amount
        ):
            return refund
    return None


def outflows_reconfirm(*, network: Network, client: RpcClient, head: int, final: int | None, now: dt.datetime) -> int:
    """Sent refunds and sweeps not final yet: one batch of receipts (no call when there are none). Final by the
    network's rule: a refund is confirmed (the customer is emailed), a sweep marked final. A transaction a
    reorg took away sends its refund back to approved, and marks its sweep removed. Returns how many changed."""
    refunds = list(Refund.objects.filter(network=network, status=R.SENT))
    sweeps = list(Sweep.objects.filter(network=network, final=False, removed_at__isnull=True))
    if not refunds and not sweeps:
        return 0
    rows: list[Refund | Sweep] = [*refunds, *sweeps]
    receipts = client.batch([("eth_getTransactionReceipt", [row.tx_hash]) for row in rows])
    kept = _gone_but_not_agreed(client, rows, receipts)
    changed = 0
    for refund, receipt in zip(refunds, receipts[: len(refunds)], strict=True):
        if refund.tx_hash not in kept:
            changed += _refund_follow(refund, receipt, network, head, final, now)
    for sweep, receipt in zip(sweeps, receipts[len(refunds) :], strict=True):
        if sweep.tx_hash in kept:
            continue
        if _gone(receipt):
            Sweep.objects.filter(pk=sweep.pk).update(removed_at=now, final=False)
            payment_books_refresh(payment_id=sweep.payment_id)  # the money is back on the address
            changed += 1
        else:
            number = int(receipt["blockNumber"], 16)
            done = block_is_final(network, number, head, final)
            Sweep.objects.filter(pk=sweep.pk).update(block_number=number, block_hash=receipt["blockHash"], final=done)
            changed += done
    return changed


def _gone(receipt: dict[str, Any] | None) -> bool:
    return receipt is None or int(receipt["status"], 16) != 1


def _gone_but_not_agreed(
    client: RpcClient, rows: list[Refund | Sweep], receipts: list[dict[str, Any] | None]
) -> set[str]:
    """Tx hashes one provider no longer has that must stay as they are: with two or more RPC URLs a second
    provider must agree before a sent refund goes back to approved (else the treasurer could pay it twice on
    one provider's word), as for credits (payments/reconfirm.py). None answering: nothing changes."""
    suspects = [row.tx_hash for row, receipt in zip(rows, receipts, strict=True) if _gone(receipt)]
    if not suspects or not client.can_cross_check:
        return set()
    first = client.last_url
    try:
        others = client.batch([("eth_getTransactionReceipt", [tx]) for tx in suspects], avoid={first} if first else ())
    except RpcUnavailable as exc:
        log.warning("no second provider to confirm %d vanished outflow(s): %s", len(suspects), exc)
        return set(suspects)
    return {tx for tx, other in zip(suspects, others, strict=True) if not _gone(other)}


def _refund_follow(
    refund: Refund, receipt: dict[str, Any] | None, network: Network, head: int, final: int | None, now: dt.datetime
) -> int:
    gone = _gone(receipt)
    number = None if gone or receipt is None else int(receipt["blockNumber"], 16)  # gone when None
    if number is not None and not block_is_final(network, number, head, final):
        if number != refund.block_number:
            Refund.objects.filter(pk=refund.pk).update(block_number=number)
        return 0
    with transaction.atomic():
        payment = PaymentRequest.objects.select_for_update().get(pk=refund.payment_id)
        refund = Refund.objects.select_for_update().get(pk=refund.pk)
        if refund.status != R.SENT:
            return 0
        if gone:
            reason = f"reorg: tx {refund.tx_hash} is no longer on the chain (head {head})"
            Refund.objects.filter(pk=refund.pk).update(tx_hash="", block_number=None)
            refund_transition(refund=refund, to=R.APPROVED, actor=ACTOR, reason=reason, now=now)
            payment_note(payment=payment, actor=ACTOR, now=now, reason=f"refund {refund.pk} back to approved: {reason}")
            payment_books_refresh(payment_id=payment.pk)
            return 1
        Refund.objects.filter(pk=refund.pk).update(block_number=number)
        refund_transition(refund=refund, to=R.CONFIRMED, actor=ACTOR, reason=f"tx {refund.tx_hash} final", now=now)
        email_enqueue(order_id=payment.order_id, name="refund_confirmed", params={"refund_id": refund.pk})
    return 1


def outflow_acknowledge(*, outflow_id: int, by: str, now: dt.datetime | None = None) -> bool:
    """The one writer of acknowledged_at/by: a staff member has looked into it. True if it was open."""
    return bool(
        UnexpectedOutflow.objects.filter(pk=outflow_id, acknowledged_at__isnull=True).update(
            acknowledged_at=now or timezone.now(), acknowledged_by=by
        )
    )


def outflow_alert_text(outflow: UnexpectedOutflow) -> tuple[str, str]:
    """The staff notification's subject and body (orders/staff_notices.py: operators, treasurers and
    STAFF_ALERT_EMAILS; ADMINS when there are none)."""
    asset = f"token {outflow.token_contract}" if outflow.token_contract else "native coin"
    body = (
        f"Money left the deposit address {outflow.payment.address} of order {outflow.payment.order.reference} "
        f"on {outflow.network.name} without an approved refund or a sweep to the treasury.\n\n"
        f"Amount: {outflow.amount_base_units} base units of {asset}\nTo: {outflow.to_address}\n"
        f"Transaction: {outflow.tx_hash} (block {outflow.block_number})\n\n"
        "It may mean the deposit key leaked. It is listed on the operator console until acknowledged."
    )
    subject = f"[{outflow.network.slug}] unexpected outflow from {outflow.payment.address}"
    return subject, body


def outflow_alert_send(*, outflow_id: int) -> int:
    """A job stored before staff notifications went through orders.staff_notices: sent as it was then."""
    outflow = UnexpectedOutflow.objects.select_related("payment__order", "network").get(pk=outflow_id)
    subject, body = outflow_alert_text(outflow)
    recipients = staff_recipients(roles=ALERT_ROLES, extra=settings.STAFF_ALERT_EMAILS)
    return staff_email_send(subject=subject, body=body, recipients=recipients) if recipients else 0

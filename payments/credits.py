"""Recording transfers seen on a chain as credits, and taking them back after a reorg.

A credit is keyed by (chain id, tx hash, log index) in the database: however many scans, notices and
workers see the same transfer, it is counted once, for one order.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from payments.addresses import gas_account_address
from payments.books import payment_books_refresh
from payments.models import Asset, Credit, CreditKind, Network, PaymentRequest

log = logging.getLogger(__name__)

TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
NATIVE_LOG_INDEX = -1


def address_topic(address: str) -> str:
    return "0x" + "0" * 24 + address[2:].lower()


def topic_address(topic: str) -> str:
    return "0x" + topic[-40:].lower()


@dataclass(frozen=True)
class Transfer:
    """A transfer to a watched address, decoded from a log or a transaction."""

    network: Network
    asset: Asset | None  # None: a token the shop does not sell on this network
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    block_timestamp: int
    sender: str
    recipient: str
    amount: int
    token: str = ""  # the token's contract, lower case; empty for the native coin
    raw: dict[str, Any] = field(default_factory=dict, compare=False)  # the log or transaction, for reviewers


def credit_kind(payment: PaymentRequest, transfer: Transfer) -> str:
    if transfer.sender.lower() == gas_account_address().lower():
        return CreditKind.GAS  # the treasurer's signer topping up gas: the shop's own coin, never the customer's
    if transfer.network.chain_id != payment.chain_id:
        return CreditKind.WRONG_NETWORK
    if transfer.asset is None or transfer.asset.pk != payment.asset_id:
        return CreditKind.WRONG_ASSET
    if dt.datetime.fromtimestamp(transfer.block_timestamp, tz=dt.UTC) > payment.expires_at:
        return CreditKind.LATE
    return CreditKind.MATCH


def counts_for(payment: PaymentRequest, transfer: Transfer) -> bool:
    """Only what arrived after the order was placed counts (its start block on its own chain)."""
    if transfer.network.chain_id == payment.chain_id:
        return transfer.block_number >= payment.start_block
    placed = int(payment.created_at.timestamp())
    return transfer.block_timestamp >= placed


def credit_record(*, payment: PaymentRequest, transfer: Transfer) -> Credit | None:
    """Store the transfer once. Returns the credit when it is new or came back after a reorg."""
    if transfer.amount <= 0 or not counts_for(payment, transfer):
        return None
    values = {
        "payment": payment,
        "network": transfer.network,
        "asset": transfer.asset,
        "token_contract": transfer.token,
        "block_number": transfer.block_number,
        "block_hash": transfer.block_hash,
        "block_timestamp": dt.datetime.fromtimestamp(transfer.block_timestamp, tz=dt.UTC),
        "sender": transfer.sender,
        "amount_base_units": transfer.amount,
        "kind": credit_kind(payment, transfer),
        "evidence": transfer.raw,
    }
    key = {"chain_id": transfer.network.chain_id, "tx_hash": transfer.tx_hash.lower(), "log_index": transfer.log_index}
    try:
        with transaction.atomic():
            # The payment's row lock orders this against its settlement (payments/settle.py): a transfer
            # stored once the payment is settled is recorded, never counted.
            settled_at = (
                PaymentRequest.objects.select_for_update().filter(pk=payment.pk).values_list("settled_at", flat=True)
            ).first()
            values["after_settlement"] = settled_at is not None
            credit: Credit
            credit, created = Credit.objects.select_for_update().get_or_create(**key, defaults=values)
            if created:
                log.info("credit %s:%s for %s", transfer.tx_hash, transfer.log_index, payment.order_id)
                payment_books_refresh(payment_id=payment.pk)
                return credit
            if credit.on_chain and credit.final and credit.block_hash != transfer.block_hash:
                # Final money in another block: a reorg deeper than the confirmations. The pass's re-check of
                # final credits (payments/reconfirm.py) handles it, so that a reviewer hears of it.
                return None
            if credit.removed_at is not None or credit.block_hash != transfer.block_hash:
                # The same transfer, seen again after a reorg (re-mined in another block).
                values.pop("after_settlement")  # it keeps the standing it had when first stored
                for name, value in values.items():
                    setattr(credit, name, value)
                credit.removed_at = None
                credit.removed_reason = ""
                credit.final = False
                credit.confirmations = 0
                credit.save()
                payment_books_refresh(payment_id=payment.pk)
                return credit
            return None
    except IntegrityError:  # a concurrent pass stored it first: it is counted once either way
        return None


def credit_remove(*, credit: Credit, reason: str, now: dt.datetime | None = None) -> None:
    """A reorg took the transfer away: keep the row as evidence, stop counting it."""
    Credit.objects.on_chain().filter(pk=credit.pk).update(
        removed_at=now or timezone.now(), removed_reason=reason[:300], final=False, confirmations=0
    )
    payment_books_refresh(payment_id=credit.payment_id)


def credit_move(*, credit: Credit, block: dict[str, Any], reason: str) -> None:
    """The same transfer, re-mined in another block by a reorg: its confirmations start again there."""
    history = list(credit.evidence.get("reorgs", [])) if isinstance(credit.evidence, dict) else []
    history.append(f"{reason}; now in block {int(block['number'], 16)}")
    evidence = {**(credit.evidence if isinstance(credit.evidence, dict) else {}), "reorgs": history}
    Credit.objects.filter(pk=credit.pk).update(
        block_number=int(block["number"], 16),
        block_hash=block["hash"],
        block_timestamp=dt.datetime.fromtimestamp(int(block["timestamp"], 16), tz=dt.UTC),
        confirmations=0,
        final=False,
        evidence=evidence,
        kind=credit_kind(credit.payment, _as_transfer(credit, block)),
    )


def _as_transfer(credit: Credit, block: dict[str, Any]) -> Transfer:
    return Transfer(
        network=credit.network,
        asset=credit.asset,
        tx_hash=credit.tx_hash,
        log_index=credit.log_index,
        block_number=int(block["number"], 16),
        block_hash=block["hash"],
        block_timestamp=int(block["timestamp"], 16),
        sender=credit.sender,
        recipient=credit.payment.address.lower(),
        amount=int(credit.amount_base_units),
        token=credit.token_contract,
    )

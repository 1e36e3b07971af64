"""Re-checking credits against the chain: confirmations, reorgs, and what needs two providers to agree.

- A credit not yet final has its receipt fetched each pass; it becomes final by the network's rule: blocks:N
  (N confirmations counted from the head the providers agree on), or at or below its `safe` or `finalized`
  block (payments/scan.py). A tag never merely shortens an N-block wait: each network has one rule.
- A final credit stays watched for PAYMENT_REORG_WATCH_HOURS (while its payment's address is watched):
  a reorg deeper than the confirmations must not go unnoticed. That costs one block read per pass, the
  block of the highest such credit: a block hash commits to every block below it, so the receipts of
  the watched credits are fetched only when that hash changed.
- A change to a credit (removed because its transaction vanished, or moved to another block) needs a
  second provider to agree when two or more RPC URLs are configured: one provider that drops a receipt
  (or lags on an old fork) neither un-credits nor confirms. Providers that disagree change nothing; the
  credit's evidence keeps the last disagreement (`last_dispute`). With one URL configured, its word is enough.
- Becoming final needs a second provider too (issue 39): it must return the same Transfer log in the same block
  (by hash). A provider can forge a log and a receipt that agree with each other; a credit only it reports stays
  not final, with the disagreement in its evidence. When no second provider answers, the one that did is trusted
  alone, as for the head.
- A final credit that a reorg changes is not un-paid silently: the caller sends the order to a reviewer.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from payments.credits import NATIVE_LOG_INDEX, TRANSFER_TOPIC, credit_move, credit_remove, topic_address
from payments.models import Credit, Network
from payments.rpc import RpcClient, RpcUnavailable

log = logging.getLogger(__name__)

OK, GONE, MOVED = "ok", "gone", "moved"


@dataclass
class Reconfirmed:
    payments: set[int] = field(default_factory=set)  # payment ids whose credits changed or aged
    removed: int = 0  # credits removed or moved by a reorg
    disputed: int = 0  # credits the providers disagree about: left as they were
    deep: dict[int, str] = field(default_factory=dict)  # payment id -> what a reorg deeper than final did


def receipt_state(credit: Credit, receipt: dict[str, Any] | None) -> str:
    """What one provider's receipt says of a credit: still in its block, gone, or in another block."""
    if receipt is None or int(receipt["status"], 16) != 1:
        return GONE
    if receipt["blockHash"].lower() != credit.block_hash.lower():
        return MOVED
    return OK


def final_credits_watched(network: Network, now: dt.datetime) -> list[Credit]:
    """Final credits still inside the reorg watch window, of payments whose address is still watched."""
    since = now - dt.timedelta(hours=settings.PAYMENT_REORG_WATCH_HOURS)
    return list(
        Credit.objects.on_chain().filter(
            network=network,
            final=True,
            block_timestamp__gte=since,
            payment__watch_until__gte=now,
        )
    )


def credits_reconfirm(
    *, network: Network, client: RpcClient, head: int, final: int | None, now: dt.datetime
) -> Reconfirmed:
    """One pass over the network's credits: at most three requests when nothing changed on the chain."""
    result = Reconfirmed()
    pending = list(Credit.objects.on_chain().filter(network=network, final=False).select_related("payment"))
    watched = final_credits_watched(network, now)
    top = max(watched, key=lambda credit: credit.block_number, default=None)
    calls: list[tuple[str, list[Any]]] = [("eth_getTransactionReceipt", [credit.tx_hash]) for credit in pending]
    if top is not None:
        calls.append(("eth_getBlockByNumber", [hex(top.block_number), False]))
    if not calls:
        return result
    answers = client.batch(calls)
    receipts = dict(zip((credit.pk for credit in pending), answers, strict=False))
    suspects = [credit for credit in pending if receipt_state(credit, receipts[credit.pk]) != OK]
    deep: set[int] = set()
    top_block = answers[-1] if top is not None else None
    if top is not None and top_block is not None and top_block["hash"].lower() != top.block_hash.lower():
        # The chain below the watched credits changed: find which of them a reorg deeper than final took.
        deep_receipts = client.batch([("eth_getTransactionReceipt", [credit.tx_hash]) for credit in watched])
        for credit, receipt in zip(watched, deep_receipts, strict=True):
            receipts[credit.pk] = receipt
            if receipt_state(credit, receipt) != OK:
                suspects.append(credit)
                deep.add(credit.pk)
    first = client.last_url
    agreed, others = _second_opinion(client, suspects)
    ripe = [
        c for c in pending if receipt_state(c, receipts[c.pk]) == OK and is_final(network, c.block_number, head, final)
    ]
    held, voucher = _unvouched(client, ripe, first=first)

    for credit in pending:
        result.payments.add(credit.payment_id)
        if receipt_state(credit, receipts[credit.pk]) != OK:
            continue
        if credit.pk in held:
            _unvouched_note(credit, first=first, other=voucher)
            result.disputed += 1
        _confirmations_update(network, credit, head, final, vouched=credit.pk not in held)
    for credit in suspects:
        receipt = receipts[credit.pk]
        if credit.pk not in agreed:
            _dispute_note(credit, first=first, receipt=receipt, other=others)
            result.disputed += 1
            continue
        result.payments.add(credit.payment_id)
        result.removed += 1
        reason = _reorg_reason(network, credit, receipt, head, deep=credit.pk in deep)
        if receipt_state(credit, receipt) == GONE:
            credit_remove(credit=credit, reason=reason)
        else:  # re-mined elsewhere (perhaps lower than the blocks a pass re-reads): follow it there
            block = client.call("eth_getBlockByNumber", [receipt["blockNumber"], False])
            credit_move(credit=credit, block=block, reason=reason)
        if credit.pk in deep:
            result.deep[credit.payment_id] = reason
            log.error("%s: %s (payment %s)", network.slug, reason, credit.payment_id)
    return result


def _second_opinion(client: RpcClient, suspects: list[Credit]) -> tuple[set[int], str | None]:
    """(the suspects another provider also finds gone or moved: only those may change, that provider's URL)."""
    if not suspects:
        return set(), None
    if not client.can_cross_check:
        return {credit.pk for credit in suspects}, None
    first = client.last_url
    try:
        answers = client.batch(
            [("eth_getTransactionReceipt", [credit.tx_hash]) for credit in suspects], avoid={first} if first else ()
        )
    except RpcUnavailable as exc:
        log.warning("no second provider to confirm %d suspected reorg(s): %s", len(suspects), exc)
        return set(), None
    agreed = {credit.pk for credit, other in zip(suspects, answers, strict=True) if receipt_state(credit, other) != OK}
    return agreed, client.last_url


def _unvouched(client: RpcClient, credits: list[Credit], *, first: str | None) -> tuple[set[int], str | None]:
    """(the credits about to become final whose transfer no second provider returns, that provider's URL). A
    provider can forge a log and a receipt that agree with each other (issue 39): before a credit is final, a second
    provider must return the same log, in the same block by the same hash. With one provider configured, or only
    one answering now, its word is all there is, as for the head (scan.agreed_head): an outage of one provider
    does not stop confirmations; /healthz and the admin's network list say when one URL is configured."""
    if not credits or not client.can_cross_check:
        return set(), None
    try:
        answers = client.batch(
            [("eth_getTransactionReceipt", [credit.tx_hash]) for credit in credits], avoid={first} if first else ()
        )
    except RpcUnavailable as exc:
        log.warning("no second provider answered to vouch for %d credit(s): trusted alone: %s", len(credits), exc)
        return set(), None
    held = {credit.pk for credit, receipt in zip(credits, answers, strict=True) if not same_transfer(credit, receipt)}
    return held, client.last_url


def same_transfer(credit: Credit, receipt: dict[str, Any] | None) -> bool:
    """Whether a receipt holds the credit's transfer: successful, in the credit's block (by hash), and for a token
    the same Transfer log (contract, index, recipient, amount). A coin transfer has no log: its receipt in that
    block is what a second provider can confirm."""
    if receipt_state(credit, receipt) != OK or receipt is None:
        return False
    if credit.log_index == NATIVE_LOG_INDEX:
        return True
    for entry in receipt.get("logs") or []:
        topics = entry.get("topics") or []
        if (
            int(entry.get("logIndex", "-0x1"), 16) == credit.log_index
            and str(entry.get("address", "")).lower() == credit.token_contract.lower()
            and len(topics) == 3
            and topics[0] == TRANSFER_TOPIC
            and topic_address(topics[2]) == credit.payment.address.lower()
            and int(entry.get("data") or "0x0", 16) == int(credit.amount_base_units)
        ):
            return True
    return False


def is_final(network: Network, block_number: int, head: int, final_block: int | None) -> bool:
    """The network's one rule: N confirmations from the agreed head, or at or below its safe/finalized block."""
    if network.finality_tag is None:
        return head - block_number + 1 >= network.confirmations_required
    return final_block is not None and block_number <= final_block


def _confirmations_update(
    network: Network, credit: Credit, head: int, final_block: int | None, *, vouched: bool = True
) -> None:
    confirmations = head - credit.block_number + 1
    final = vouched and is_final(network, credit.block_number, head, final_block)
    Credit.objects.filter(pk=credit.pk).update(confirmations=max(confirmations, 0), final=final)


def _reorg_reason(network: Network, credit: Credit, receipt: dict[str, Any] | None, head: int, *, deep: bool) -> str:
    where = f"block {credit.block_number} ({credit.block_hash})"
    if not deep:
        if receipt_state(credit, receipt) == GONE:
            return f"reorg: the transaction vanished from the chain (head {head})"
        return f"reorg: block {credit.block_number} was replaced"
    tag = network.finality_tag
    depth = f"the {tag} block" if tag else f"{network.confirmations_required} confirmations"
    prefix = f"reorg deeper than {depth}: tx {credit.tx_hash} {where}"
    if receipt is None or receipt_state(credit, receipt) == GONE:  # None is GONE: said for mypy's narrowing
        return f"{prefix} vanished from the chain (head {head})"
    return f"{prefix} was replaced; the transaction is now in block {int(receipt['blockNumber'], 16)}"


def _host(url: str | None) -> str:
    return (url or "?").split("://")[-1].split("/")[0]


def _dispute_note(credit: Credit, *, first: str | None, receipt: dict[str, Any] | None, other: str | None) -> None:
    """Providers disagree about this credit (or none could confirm): it stays as it was, and reviewers
    can read why it waits."""
    found = (  # None is GONE: said for mypy's narrowing
        "no receipt"
        if receipt is None or receipt_state(credit, receipt) == GONE
        else f"it in block {int(receipt['blockNumber'], 16)}"
    )
    backing = (
        f"{_host(other)} still has it in block {credit.block_number}"
        if other
        else "no other provider answered to confirm it"
    )
    _note(credit, f"RPC providers disagree: {_host(first)} had {found}; {backing}")


def _unvouched_note(credit: Credit, *, first: str | None, other: str | None) -> None:
    """The first provider has the transfer and the second does not return it: it waits, not final, and says why."""
    had = f"{_host(first)} had it in block {credit.block_number}"
    _note(credit, f"RPC providers disagree: {had}; {_host(other)} returns no such transfer")


def _note(credit: Credit, note: str) -> None:
    evidence = credit.evidence if isinstance(credit.evidence, dict) else {}
    log.warning("credit %s:%s: %s", credit.tx_hash, credit.log_index, note)
    if evidence.get("last_dispute") != note:
        Credit.objects.filter(pk=credit.pk).update(evidence={**evidence, "last_dispute": note})

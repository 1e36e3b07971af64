"""One verification pass over one network: new transfers, confirmations, reorgs, then settlement.

RPC calls grow with block ranges, not with open orders: one eth_getLogs per block range for all
token contracts of the network, with topic2 = the OR list of every watched address (chunked).
Native-coin transfers are found by reading the range's blocks in batches (payments/native.py), and
coin forwarded by contracts through one batch of balances for the network's native-coin orders.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Min
from django.utils import timezone

from payments.credits import (
    TRANSFER_TOPIC,
    Transfer,
    address_topic,
    credit_move,
    credit_record,
    credit_remove,
    topic_address,
)
from payments.models import Asset, Credit, Network, PaymentRequest, PaymentStatus, ScanCursor
from payments.native import chunks, top_level_transfers, unexplained_balance_transfers
from payments.networks import network_health_record, rpc_client
from payments.rpc import Head, RpcClient, RpcUnavailable

log = logging.getLogger(__name__)

ADDRESSES_PER_LOGS_CALL = 10_000  # anvil refuses requests over about 2 MiB (about 29,000 addresses)
MAX_RANGES_PER_PASS = 50  # a pass after a long outage stops here; the next one goes on from the cursor


@dataclass
class PassReport:
    network: str
    head: int = 0
    safe: int | None = None
    from_block: int = 0
    to_block: int = -1
    logs: int = 0
    credited: int = 0
    removed: int = 0
    payments: set[int] = field(default_factory=set)  # payment ids whose credits changed or aged

    def __str__(self) -> str:
        return (
            f"{self.network}: blocks {self.from_block}-{self.to_block} (head {self.head}, safe {self.safe}), "
            f"{self.logs} logs, {self.credited} credited, {self.removed} removed, {len(self.payments)} settled"
        )


def watched_payments(now: dt.datetime) -> list[PaymentRequest]:
    """Every deposit address still watched, on any network: money on the wrong chain is found too."""
    return list(
        PaymentRequest.objects.filter(watch_until__gte=now)
        .exclude(status=PaymentStatus.REJECTED)
        .select_related("asset__network")
    )


def _cursor(network: Network, head: Head, watched: list[PaymentRequest]) -> ScanCursor:
    cursor = ScanCursor.objects.filter(network=network).first()
    if cursor is not None:
        return cursor
    first = PaymentRequest.objects.filter(chain_id=network.chain_id, watch_until__isnull=False).aggregate(
        Min("start_block")
    )["start_block__min"]
    start = min(head.number, first) if first is not None else head.number
    cursor, _ = ScanCursor.objects.get_or_create(network=network, defaults={"next_block": start})
    return cursor


def scan_network(*, network: Network, client: RpcClient | None = None, now: dt.datetime | None = None) -> PassReport:
    """One pass. Raises RpcUnavailable (transient) when no RPC URL gives a fresh head."""
    from payments.settle import payment_settle  # settle imports shop, which imports checkout

    now = now or timezone.now()
    client = client or rpc_client(network)
    report = PassReport(network=network.slug)
    try:
        head = client.head()
        chain_id = client.chain_id()
        safe = client.tagged_block_number("safe") if network.use_safe_tag else None
    except RpcUnavailable as exc:
        network_health_record(network=network, ok=False, error=str(exc))
        raise
    if chain_id != network.chain_id:
        error = f"the RPC serves chain {chain_id}, not {network.chain_id}"
        network_health_record(network=network, ok=False, error=error)
        raise RpcUnavailable(error)
    network_health_record(network=network, ok=True, head=head.number)
    report.head = head.number
    report.safe = safe

    watched = watched_payments(now)
    cursor = _cursor(network, head, watched)
    if watched:
        _scan_new_blocks(network, client, cursor, head, watched, report)
    _reconfirm(network, client, head, report)
    cursor.last_pass_at = now
    cursor.save(update_fields=["last_pass_at"])
    for payment_id in sorted(report.payments):
        payment_settle(payment_id=payment_id, now=now)
    log.info("scan %s", report)
    return report


def _scan_new_blocks(network, client, cursor, head, watched, report) -> None:
    by_address = {payment.address.lower(): payment for payment in watched}
    topics = [address_topic(address) for address in sorted(by_address)]
    tokens = {asset.contract.lower(): asset for asset in Asset.objects.filter(network=network, contract__isnull=False)}
    native = Asset.objects.filter(network=network, contract__isnull=True).first()
    # Re-read the last blocks: a reorg can put a transfer into a block height already scanned.
    start = max(0, cursor.next_block - network.confirmations_required)
    report.from_block = start
    for _ in range(MAX_RANGES_PER_PASS):
        if start > head.number:
            break
        end = min(start + network.max_block_range - 1, head.number)
        transfers: list[Transfer] = []
        if tokens:
            transfers += _token_transfers(network, client, tokens, topics, start, end, by_address, report)
        if native is not None:  # any watched address: coin sent to a token order's address goes to review
            transfers += top_level_transfers(
                network=network, client=client, asset=native, start=start, end=end, addresses=set(by_address)
            )
        for transfer in transfers:
            _record(by_address, transfer, report)
        # Only now, with the range stored, may the cursor move past it.
        cursor.next_block = max(cursor.next_block, end + 1)
        cursor.save(update_fields=["next_block"])
        report.to_block = end
        start = end + 1
    if native is not None:
        own = [p for p in watched if p.asset_id == native.pk]
        for transfer in unexplained_balance_transfers(
            network=network, client=client, asset=native, payments=own, head=head.number
        ):
            _record(by_address, transfer, report)


def _record(by_address: dict, transfer: Transfer, report: PassReport) -> None:
    payment = by_address[transfer.recipient]
    if credit_record(payment=payment, transfer=transfer) is not None:
        report.credited += 1
        report.payments.add(payment.pk)


def _token_transfers(network, client, tokens, topics, start, end, by_address, report) -> list[Transfer]:
    transfers = []
    for topic_chunk in chunks(topics, ADDRESSES_PER_LOGS_CALL):
        logs = client.call(
            "eth_getLogs",
            [
                {
                    "fromBlock": hex(start),
                    "toBlock": hex(end),
                    "address": list(tokens),
                    "topics": [TRANSFER_TOPIC, None, topic_chunk],
                }
            ],
        )
        report.logs += len(logs)
        missing_times = {log["blockNumber"] for log in logs if "blockTimestamp" not in log}
        times = _block_timestamps(client, missing_times)
        for entry in logs:
            if entry.get("removed") or len(entry["topics"]) != 3:
                continue  # a removed log is a reorg's leftover; a 4-topic Transfer is an ERC-721
            recipient = topic_address(entry["topics"][2])
            if recipient not in by_address:
                continue
            transfers.append(
                Transfer(
                    network=network,
                    asset=tokens[entry["address"].lower()],
                    tx_hash=entry["transactionHash"],
                    log_index=int(entry["logIndex"], 16),
                    block_number=int(entry["blockNumber"], 16),
                    block_hash=entry["blockHash"],
                    block_timestamp=int(entry.get("blockTimestamp") or times[entry["blockNumber"]], 16),
                    sender=topic_address(entry["topics"][1]),
                    recipient=recipient,
                    amount=int(entry["data"][:66], 16) if entry["data"] not in ("0x", "") else 0,
                    raw=entry,
                )
            )
    return transfers


def _block_timestamps(client: RpcClient, numbers: Iterable[str]) -> dict[str, str]:
    numbers = sorted(numbers)
    blocks = client.batch([("eth_getBlockByNumber", [number, False]) for number in numbers])
    return {number: block["timestamp"] for number, block in zip(numbers, blocks, strict=True) if block}


def _reconfirm(network: Network, client: RpcClient, head: Head, report: PassReport) -> None:
    """Until final, each credit's receipt is fetched again: gone or moved means a reorg."""
    pending = list(Credit.objects.filter(network=network, removed_at__isnull=True, final=False))
    if not pending:
        return
    receipts = client.batch([("eth_getTransactionReceipt", [credit.tx_hash]) for credit in pending])
    for credit, receipt in zip(pending, receipts, strict=True):
        report.payments.add(credit.payment_id)
        if receipt is None or int(receipt["status"], 16) != 1:
            credit_remove(credit=credit, reason=f"reorg: the transaction vanished from the chain (head {head.number})")
            report.removed += 1
            continue
        if receipt["blockHash"].lower() != credit.block_hash.lower():
            # Re-mined elsewhere (perhaps lower than the blocks a pass re-reads): follow it there.
            block = client.call("eth_getBlockByNumber", [receipt["blockNumber"], False])
            credit_move(credit=credit, block=block, reason=f"reorg: block {credit.block_number} was replaced")
            report.removed += 1
            continue
        confirmations = head.number - credit.block_number + 1
        final = confirmations >= network.confirmations_required or (
            report.safe is not None and credit.block_number <= report.safe
        )
        Credit.objects.filter(pk=credit.pk).update(confirmations=max(confirmations, 0), final=final)

"""One verification pass over one network: new transfers, confirmations, reorgs, then settlement.

RPC calls grow with block ranges, not with open orders: one batch of two eth_getLogs per block range for every
ERC-20 Transfer (whatever the token contract) with topic2 (in) and topic1 (out) = the OR list of every watched
address (chunked). Native-coin transfers, in and out, are found by the watched addresses' balances and nonces
(payments/coin_watch.py), and the blocks where they moved read in batches (payments/native.py); coin forwarded by
contracts through one batch of balances for the network's native-coin orders. What leaves a deposit address is
classified by payments/outflows.py.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import Min
from django.utils import timezone

from core.log_context import log_context
from payments.coin_watch import CoinWatch
from payments.credits import TRANSFER_TOPIC, Transfer, address_topic, credit_record, topic_address
from payments.log_ranges import LOG_SPANS, range_refused
from payments.models import Asset, Credit, Network, PaymentRequest, Refund, RefundStatus, ScanCursor, Sweep
from payments.native import chunks, top_level_moves, unexplained_balance_transfers
from payments.networks import network_health_record, rpc_client
from payments.outflows import outflow_record, outflows_reconfirm
from payments.provider_usage import provider_usage_record
from payments.reconfirm import credits_reconfirm
from payments.rpc import Head, RateLimited, RpcClient, RpcResponseError, RpcUnavailable
from payments.settle import payment_settle, payment_settle_after_deep_reorg

log = logging.getLogger(__name__)
T = TypeVar("T")

ADDRESSES_PER_LOGS_CALL = 10_000  # anvil refuses requests over about 2 MiB (about 29,000 addresses)
MAX_RANGES_PER_PASS = 50  # a pass after a long outage stops here; the next one goes on from the cursor


@dataclass
class PassReport:
    network: str
    head: int = 0
    final: int | None = None  # the network's `safe` or `finalized` block, by its rule
    from_block: int = 0
    to_block: int = -1
    logs: int = 0
    credited: int = 0
    outflows: int = 0  # transfers out of watched addresses recorded now (refunds sent, sweeps, unexpected)
    removed: int = 0
    disputed: int = 0  # credits the RPC providers disagree about, left as they were
    payments: set[int] = field(default_factory=set)  # payment ids whose credits changed or aged
    deep_reorgs: dict[int, str] = field(default_factory=dict)  # payment id -> what took its final money

    def __str__(self) -> str:
        return (
            f"{self.network}: blocks {self.from_block}-{self.to_block} (head {self.head}, final {self.final}), "
            f"{self.logs} logs, {self.credited} credited, {self.outflows} outflows, {self.removed} removed, "
            f"{self.disputed} disputed, "
            f"{len(self.deep_reorgs)} deep reorgs, {len(self.payments)} settled"
        )


def agreed_head(network: Network, client: RpcClient) -> tuple[Head, int | None]:
    """The head to count confirmations from, and the final block of the network's rule (its `safe` or
    `finalized` block; None under blocks:N). With two or more RPC URLs, a second provider is asked too and
    the lower of each is used: a provider that runs ahead of the others (a fork, a lie) cannot confirm a
    payment on its own word. Only one provider answering is trusted alone, as a lone configured URL is."""
    head = client.head()
    first = client.last_url
    final = _final_block(network, client)
    if not client.can_cross_check:
        return head, final
    elsewhere = {first} if first else set()
    try:
        other = client.head(avoid=elsewhere)
        other_final = _final_block(network, client, avoid=elsewhere)
    except RpcUnavailable as exc:
        log.warning("%s: one RPC provider answered, no second one to check its head: %s", network.slug, exc)
        return head, final
    if other.number < head.number:
        log.info("%s: providers' heads differ (%d, %d): the lower counts", network.slug, head.number, other.number)
        head = other
    return head, None if final is None or other_final is None else min(final, other_final)  # both None or neither


def _final_block(network: Network, client: RpcClient, avoid: Collection[str] = ()) -> int | None:
    """The number of the block the network's rule calls final. A provider that does not serve the tag the rule
    needs cannot verify this network: that is an outage, not a reason to wait forever."""
    tag = network.finality_tag
    if tag is None:
        return None
    number = client.tagged_block_number(tag, avoid=avoid)
    if number is None:
        raise RpcUnavailable(f"the RPC does not serve the `{tag}` block this network's finality rule needs")
    return number


def watched_payments(now: dt.datetime) -> list[PaymentRequest]:
    """Every deposit address still watched (PaymentRequest.objects.watched), on any network: money on the wrong
    chain is found too; a refund or sweep from it is recorded whenever the signer sends it."""
    return list(PaymentRequest.objects.watched(now).select_related("asset__network"))


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
    """One pass. Raises RpcUnavailable (transient) when no RPC URL gives a fresh head, RateLimited when the
    providers still refused after their Retry-After: the network's health then says so."""
    client = client or rpc_client(network)
    with log_context(network=network.slug):
        try:
            return _scan_network(network=network, client=client, now=now)
        except RateLimited as exc:
            # Rate limits are not "down": the network stays offered, its health names them, the next pass goes on.
            network_health_record(network=network, ok=True, error=str(exc))
            raise
        finally:
            provider_usage_record(network=network, client=client)


def _scan_network(*, network: Network, client: RpcClient, now: dt.datetime | None) -> PassReport:
    now = now or timezone.now()
    report = PassReport(network=network.slug)
    watched = watched_payments(now)
    if not watched and not _money_in_flight(network):
        return _idle_pass(network, client, report, now)
    head, final = _health_checked(network, lambda: agreed_head(network, client))
    _chain_verify(network, client)
    network_health_record(network=network, ok=True, head=head.number)
    report.head = head.number
    report.final = final

    cursor = _cursor(network, head, watched)
    if watched:
        _scan_new_blocks(network, client, cursor, head, watched, report, now)
    checked = credits_reconfirm(network=network, client=client, head=head.number, final=final, now=now)
    outflows_reconfirm(network=network, client=client, head=head.number, final=final, now=now)
    report.payments |= checked.payments
    report.removed += checked.removed
    report.disputed += checked.disputed
    report.deep_reorgs = checked.deep
    cursor.last_pass_at = now
    cursor.save(update_fields=["last_pass_at"])
    for payment_id, reason in sorted(report.deep_reorgs.items()):
        payment_settle_after_deep_reorg(payment_id=payment_id, reason=reason, now=now)
    for payment_id in sorted(report.payments - set(report.deep_reorgs)):
        payment_settle(payment_id=payment_id, now=now)
    log.info("scan %s", report)
    return report


def _health_checked(network: Network, read: Callable[[], T]) -> T:
    """What `read()` returns; no provider answering (not rate limits: scan_network says those) is recorded in the
    network's health first: checkout stops offering it."""
    try:
        return read()
    except RateLimited:
        raise
    except RpcUnavailable as exc:
        network_health_record(network=network, ok=False, error=str(exc))
        raise


def _chain_verify(network: Network, client: RpcClient) -> None:
    """The providers serve the network's chain: a URL pointed at another chain takes the network down."""
    chain_id = _health_checked(network, client.chain_id)
    if chain_id != network.chain_id:
        error = f"the RPC serves chain {chain_id}, not {network.chain_id}"
        network_health_record(network=network, ok=False, error=error)
        raise RpcUnavailable(error)


def _money_in_flight(network: Network) -> bool:
    """Whether a pass has something to follow on the network even with no address watched: a credit, a refund or
    a sweep not final yet."""
    return (
        Credit.objects.on_chain().filter(network=network, final=False).exists()
        or Refund.objects.filter(network=network, status=RefundStatus.SENT).exists()
        or Sweep.objects.filter(network=network, final=False, removed_at__isnull=True).exists()
    )


def _idle_pass(network: Network, client: RpcClient, report: PassReport, now: dt.datetime) -> PassReport:
    """Nothing watched and nothing to follow: at most a head read (and the chain id: a free call) every
    IDLE_PASS_SECONDS, to keep the network's health current (checkout offers only networks that answer)."""
    cursor = ScanCursor.objects.filter(network=network).first()
    if cursor and cursor.last_pass_at and (now - cursor.last_pass_at).total_seconds() < settings.IDLE_PASS_SECONDS:
        return report
    head = _health_checked(network, client.head)
    _chain_verify(network, client)
    network_health_record(network=network, ok=True, head=head.number)
    report.head = head.number
    first = {"next_block": head.number, "last_pass_at": now}
    ScanCursor.objects.update_or_create(network=network, defaults={"last_pass_at": now}, create_defaults=first)
    return report


def _scan_new_blocks(
    network: Network,
    client: RpcClient,
    cursor: ScanCursor,
    head: Head,
    watched: list[PaymentRequest],
    report: PassReport,
    now: dt.datetime,
) -> None:
    by_address = {payment.address.lower(): payment for payment in watched}
    topics = [address_topic(address) for address in sorted(by_address)]
    tokens = {
        asset.contract.lower(): asset
        for asset in Asset.objects.filter(network=network, contract__isnull=False)
        if asset.contract is not None  # always: the filter's; said for mypy
    }
    native = Asset.objects.filter(network=network, contract__isnull=True).first()
    # Re-read the last blocks: a reorg can put a transfer into a block height already scanned.
    start = max(0, cursor.next_block - network.confirmations_required)
    report.from_block = start
    spans = (network.slug, tuple(client.urls))
    coin = None if native is None else CoinWatch(network=network, client=client, asset=native, watched=watched)
    holders = _token_holders(network, by_address)

    def record(transfers: list[Transfer], outflows: list[Transfer]) -> None:
        for transfer in transfers:
            _record(by_address, transfer, report)
        for transfer in outflows:
            if outflow_record(payment=by_address[transfer.sender], transfer=transfer, now=now) is not None:
                report.outflows += 1

    for _ in range(MAX_RANGES_PER_PASS):
        if start > head.number:
            break
        end = min(start + LOG_SPANS.span(spans, network.max_block_range) - 1, head.number)
        try:
            transfers, outflows = _token_transfers(
                network, client, tokens, topics, holders, start, end, by_address, report
            )
        except RpcResponseError as exc:
            if end == start or not range_refused(str(exc)):
                raise
            # Too many blocks (or logs) for this provider: the same start again, with a smaller range.
            smaller = LOG_SPANS.refused(spans, end - start + 1, str(exc))
            log.info("scan %s: blocks %d-%d refused (%s): %d at a time", network.slug, start, end, exc, smaller)
            continue
        LOG_SPANS.worked(spans, end - start + 1, network.max_block_range)
        if coin is not None and coin.read_in_full():  # an address's first pass
            coin_in, coin_out = top_level_moves(
                network=network, client=client, asset=coin.asset, start=start, end=end, addresses=coin.read_in_full()
            )
            transfers += coin_in
            outflows += coin_out
        record(transfers, outflows)
        # Only now, with the range stored, may the cursor move past it.
        cursor.next_block = max(cursor.next_block, end + 1)
        cursor.save(update_fields=["next_block"])
        report.to_block = end
        start = end + 1
    if coin is not None:
        balances = coin.after_pass(cursor=cursor, last_read=report.to_block, now=now, record=record)
        own = [p for p in watched if p.asset_id == coin.asset.pk]
        known = balances if report.to_block == head.number else {}
        for transfer in unexplained_balance_transfers(
            network=network, client=client, asset=coin.asset, payments=own, head=head.number, known=known
        ):
            _record(by_address, transfer, report)


def _token_holders(network: Network, by_address: dict[str, PaymentRequest]) -> set[str]:
    """The watched addresses tokens can leave on this network: those credited here (an address that never
    received anything here has nothing to send; one paid during a range is added by _token_transfers)."""
    credited = set(
        Credit.objects.on_chain()
        .filter(network=network, payment__in=list(by_address.values()))
        .values_list("payment_id", flat=True)
    )
    return {address for address, payment in by_address.items() if payment.pk in credited}


def _record(by_address: dict[str, PaymentRequest], transfer: Transfer, report: PassReport) -> None:
    payment = by_address[transfer.recipient]
    if credit_record(payment=payment, transfer=transfer) is not None:
        report.credited += 1
        report.payments.add(payment.pk)


def _token_transfers(
    network: Network,
    client: RpcClient,
    tokens: dict[str, Asset],
    topics: list[str],
    holders: set[str],
    start: int,
    end: int,
    by_address: dict[str, PaymentRequest],
    report: PassReport,
) -> tuple[list[Transfer], list[Transfer]]:
    """(in, out): every ERC-20 Transfer to a watched address, from any contract (a token the shop does not sell,
    USDC.e, USDT0, anything, is recorded too, and goes to a reviewer as a wrong asset), and every one from a
    watched address that may hold tokens here (`holders`: credited on this network, or paid in this range). One
    request: the filters travel in one batch; a second only when a range brings tokens to an address that had
    none, for what left it in the same range. `holders` grows with those addresses."""
    window = {"fromBlock": hex(start), "toBlock": hex(end)}

    def out_filters(addresses: set[str]) -> list[tuple[str, list[Any]]]:
        ordered = [address_topic(address) for address in sorted(addresses)]
        return [
            ("eth_getLogs", [{**window, "topics": [TRANSFER_TOPIC, chunk]}])
            for chunk in chunks(ordered, ADDRESSES_PER_LOGS_CALL)
        ]

    calls_in = [
        ("eth_getLogs", [{**window, "topics": [TRANSFER_TOPIC, None, chunk]}])
        for chunk in chunks(topics, ADDRESSES_PER_LOGS_CALL)
    ]
    answers = client.batch(calls_in + out_filters(holders))
    logs_in = [entry for answer in answers[: len(calls_in)] for entry in answer]
    logs_out = [entry for answer in answers[len(calls_in) :] for entry in answer]
    paid_here = {
        topic_address(entry["topics"][2]) for entry in logs_in if len(entry["topics"]) == 3 and not entry.get("removed")
    }
    newcomers = (paid_here & set(by_address)) - holders
    if newcomers:
        logs_out += [entry for answer in client.batch(out_filters(newcomers)) for entry in answer]
        holders |= newcomers
    transfers: list[Transfer] = []
    outflows: list[Transfer] = []
    report.logs += len(logs_in)
    missing_times = {log["blockNumber"] for log in logs_in + logs_out if "blockTimestamp" not in log}
    times = _block_timestamps(client, missing_times)
    found_in = [(entry, transfers, 2) for entry in logs_in]
    for entry, found, watched_topic in found_in + [(entry, outflows, 1) for entry in logs_out]:
        if entry.get("removed") or len(entry["topics"]) != 3:
            continue  # a removed log is a reorg's leftover; a 4-topic Transfer is an ERC-721
        if topic_address(entry["topics"][watched_topic]) not in by_address:
            continue
        recipient = topic_address(entry["topics"][2])
        found.append(
            Transfer(
                network=network,
                asset=tokens.get(entry["address"].lower()),
                token=entry["address"].lower(),
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
    return transfers, outflows


def _block_timestamps(client: RpcClient, numbers: Iterable[str]) -> dict[str, str]:
    numbers = sorted(numbers)
    blocks = client.batch([("eth_getBlockByNumber", [number, False]) for number in numbers])
    return {number: block["timestamp"] for number, block in zip(numbers, blocks, strict=True) if block}

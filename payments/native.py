"""Native-coin transfers (ETH, BNB, POL), which leave no log.

Two ways in: a plain transaction to the deposit address (read from the range's blocks, batched), and
coin forwarded by a contract (a smart-contract wallet, an exchange's batch): the deposit address's
balance, read in one batch for native-coin orders, shows more than the credits explain, and a
call trace of the block where it rose names the transaction.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, TypeVar

from django.conf import settings

from payments.credits import NATIVE_LOG_INDEX, Transfer
from payments.models import Asset, Credit, Network, PaymentRequest
from payments.rpc import RpcClient, RpcResponseError

log = logging.getLogger(__name__)

BLOCKS_PER_BATCH = 100  # at most; fewer where full blocks are large (full_blocks)
# Coin forwarded inside a transaction: log index -1000 - <position of the call in the trace>.
INTERNAL_LOG_INDEX_BASE = -1000
CALL_TRACER = {"tracer": "callTracer"}


T = TypeVar("T")


def chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def transfer_from_tx(*, network: Network, asset: Asset, block: dict[str, Any], tx: dict[str, Any]) -> Transfer:
    return Transfer(
        network=network,
        asset=asset,
        tx_hash=tx["hash"],
        log_index=NATIVE_LOG_INDEX,
        block_number=int(block["number"], 16),
        block_hash=block["hash"],
        block_timestamp=int(block["timestamp"], 16),
        sender=tx["from"].lower(),
        recipient=tx["to"].lower(),
        amount=int(tx["value"], 16),
        raw={key: tx.get(key) for key in ("hash", "from", "to", "value", "blockNumber", "blockHash", "nonce")},
    )


class _FullBlocksPerRequest:
    """How many full blocks one request may ask for, per network and provider: as many as keep the answer
    under RPC_MAX_RESPONSE_BYTES at the size the last blocks had (a 100-block batch of full blocks on Base or
    BSC is tens of MB, past every provider's cap). A refusal on size splits the batch (RpcClient.batch)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, tuple[str, ...]], int] = {}

    def get(self, key: tuple[str, tuple[str, ...]]) -> int:
        with self._lock:
            return self._counts.get(key, FIRST_FULL_BLOCKS_PER_REQUEST)

    def measured(self, key: tuple[str, tuple[str, ...]], blocks: int, answer_bytes: int) -> None:
        """At most twice the blocks of this answer next time: a run of small blocks never licenses one request
        large enough to bring back a busy stretch whole."""
        per_block = max(1, answer_bytes // max(1, blocks))
        fits = settings.RPC_MAX_RESPONSE_BYTES // per_block
        with self._lock:
            self._counts[key] = max(1, min(BLOCKS_PER_BATCH, 2 * blocks, fits))

    def forget(self) -> None:
        with self._lock:
            self._counts.clear()


FIRST_FULL_BLOCKS_PER_REQUEST = 10  # before a block's size is known on a network
FULL_BLOCKS_PER_REQUEST = _FullBlocksPerRequest()


def full_blocks(client: RpcClient, network: Network, start: int, end: int) -> Iterator[dict[str, Any] | None]:
    """Blocks [start, end] with their transactions, in requests whose answers stay under the size bound."""
    key = (network.slug, tuple(client.urls))
    number = start
    while number <= end:
        count = min(FULL_BLOCKS_PER_REQUEST.get(key), end - number + 1)
        before = client.response_bytes
        yield from client.batch([("eth_getBlockByNumber", [hex(n), True]) for n in range(number, number + count)])
        FULL_BLOCKS_PER_REQUEST.measured(key, count, client.response_bytes - before)
        number += count


def top_level_moves(
    *, network: Network, client: RpcClient, asset: Asset, start: int, end: int, addresses: set[str]
) -> tuple[list[Transfer], list[Transfer]]:
    """(coin in, coin out) of the watched addresses in [start, end], from the same block reads: transactions
    with value to one, and transactions with value signed by one (a deposit address is a plain account, so
    only such a transaction moves its coin; its fee is not value and is not counted). Reverted ones moved
    nothing. Limit: an address given code by EIP-7702 could move coin in an internal call; that is not seen."""
    candidates: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for block in full_blocks(client, network, start, end):
        if block is None:  # a block not served: no transactions
            continue
        for tx in block.get("transactions", []):
            watched = (tx.get("to") or "").lower() in addresses or tx["from"].lower() in addresses
            if watched and tx.get("to") and int(tx["value"], 16) > 0:
                candidates.append((block, tx))
    if not candidates:
        return [], []
    receipts = client.batch([("eth_getTransactionReceipt", [tx["hash"]]) for _block, tx in candidates])
    moved = [
        transfer_from_tx(network=network, asset=asset, block=block, tx=tx)
        for (block, tx), receipt in zip(candidates, receipts, strict=True)
        if receipt and int(receipt["status"], 16) == 1
    ]
    return (
        [transfer for transfer in moved if transfer.recipient in addresses],
        [transfer for transfer in moved if transfer.sender in addresses],
    )


# Frame types whose value leaves the caller for `to`. DELEGATECALL and STATICCALL carry none of their own
# (a tracer shows a DELEGATECALL with its parent's value: counting it would count that value twice), and a
# CALLCODE's value stays with the caller.
VALUE_MOVING_FRAMES = frozenset({"CALL", "CREATE", "CREATE2", "SELFDESTRUCT"})


def _value_moves(
    frame: dict[str, Any],
    recipient: str,
    found: list[tuple[int, str, int]],
    counter: list[int],
    depth: int = 0,
    undone: bool = False,
) -> None:
    """Depth-first over a callTracer frame: value-carrying frames into `recipient` below the top level whose
    value really moved. A frame that failed undoes every frame below it, even the ones that succeeded (a
    `try/catch` around an inner call that pays and then reverts): `undone` is carried down the tree."""
    counter[0] += 1
    position = counter[0]
    undone = undone or bool(frame.get("error"))
    pays = (frame.get("to") or "").lower() == recipient and int(frame.get("value") or "0x0", 16) > 0
    if depth > 0 and pays and not undone and frame.get("type", "CALL") in VALUE_MOVING_FRAMES:
        found.append((position, frame["from"].lower(), int(frame["value"], 16)))
    for child in frame.get("calls") or []:
        _value_moves(child, recipient, found, counter, depth + 1, undone)


def internal_transfers(
    *, network: Network, asset: Asset, block: dict[str, Any], tx_hash: str, trace: dict[str, Any], recipient: str
) -> list[Transfer]:
    found: list[tuple[int, str, int]] = []  # (position in the trace, sender, value)
    _value_moves(trace, recipient, found, [0])
    return [
        Transfer(
            network=network,
            asset=asset,
            tx_hash=tx_hash,
            log_index=INTERNAL_LOG_INDEX_BASE - position,
            block_number=int(block["number"], 16),
            block_hash=block["hash"],
            block_timestamp=int(block["timestamp"], 16),
            sender=sender,
            recipient=recipient,
            amount=value,
            raw={"trace_position": position, "from": sender, "to": recipient, "value": hex(value)},
        )
        for position, sender, value in found
    ]


def within_balance_gain(
    *, client: RpcClient, network: Network, address: str, block_number: int, transfers: list[Transfer]
) -> list[Transfer]:
    """What traces credit to an address in one block never exceeds what its balance really gained in that
    block (`eth_getBalance` at N-1 and N), less what other counted transfers there explain: a tracer that
    errs or lies cannot credit coin that never arrived. Raises RpcResponseError without historical state."""
    if not transfers:
        return []
    before, after = client.batch(
        [("eth_getBalance", [address, hex(max(block_number - 1, 0))]), ("eth_getBalance", [address, hex(block_number)])]
    )
    gained = int(after, 16) - (int(before, 16) if block_number > 0 else 0)
    keys = {(transfer.tx_hash.lower(), transfer.log_index) for transfer in transfers}
    others = (
        Credit.objects.on_chain()
        .filter(
            chain_id=network.chain_id,
            payment__address__iexact=address,
            block_number=block_number,
            log_index__lt=0,  # native-coin credits: -1 for a plain transfer, below -1000 for a traced one
        )
        .values_list("tx_hash", "log_index", "amount_base_units")
    )
    allowance = gained - sum(int(amount) for tx_hash, index, amount in others if (tx_hash, index) not in keys)
    kept = []
    for transfer in transfers:
        amount = max(0, min(transfer.amount, allowance))
        allowance -= amount
        if amount < transfer.amount:
            log.error(
                "%s: trace of %s credits %d wei to %s in block %d, but its balance gained only %d there: %d counted",
                network.slug,
                transfer.tx_hash,
                transfer.amount,
                address,
                block_number,
                gained,
                amount,
            )
            if amount == 0:
                continue
            transfer = replace(transfer, amount=amount, raw={**transfer.raw, "traced_value": hex(transfer.amount)})
        kept.append(transfer)
    return kept


def traced_transfers_in_tx(
    *, network: Network, client: RpcClient, asset: Asset, block: dict[str, Any], tx_hash: str, recipient: str
) -> list[Transfer]:
    """Coin a contract forwarded to `recipient` inside one transaction; [] where tracing (or the balance
    history that bounds it) is unsupported."""
    try:
        trace = client.call("debug_traceTransaction", [tx_hash, CALL_TRACER])
        transfers = internal_transfers(
            network=network, asset=asset, block=block, tx_hash=tx_hash, trace=trace, recipient=recipient
        )
        return within_balance_gain(
            client=client,
            network=network,
            address=recipient,
            block_number=int(block["number"], 16),
            transfers=transfers,
        )
    except RpcResponseError as exc:
        log.warning("%s: cannot trace %s (%s)", network.slug, tx_hash, exc)
        return []


def unexplained_balance_transfers(
    *,
    network: Network,
    client: RpcClient,
    asset: Asset,
    payments: list[PaymentRequest],
    head: int,
    known: dict[str, int] | None = None,
) -> list[Transfer]:
    """One batch of balances for the network's native-coin orders (`known`: balances at `head` already read,
    by address); where a balance rose by more than the credits explain (coin already on the address before the
    order is not the customer's), find the block where it rose (bisection) and trace it for the forwarding call."""
    if not payments:
        return []
    known = known or {}
    unread = [payment for payment in payments if payment.address.lower() not in known]
    read = client.batch([("eth_getBalance", [payment.address, hex(head)]) for payment in unread]) if unread else []
    known = {**known, **{payment.address.lower(): int(value, 16) for payment, value in zip(unread, read, strict=True)}}
    balances = [hex(known[payment.address.lower()]) for payment in payments]
    transfers = []
    for payment, balance in zip(payments, balances, strict=True):
        credits = list(Credit.objects.on_chain().filter(payment=payment, network=network, asset=asset))
        explained = sum(int(credit.amount_base_units) for credit in credits)
        if int(balance, 16) <= explained:
            continue
        try:
            if int(balance, 16) - opening_balance(client, payment) <= explained:
                continue
            transfers += _find_forwarded(network, client, asset, payment, credits, head)
        except RpcResponseError as exc:  # no historical state or no tracing on this node
            log.warning("%s: unexplained balance at %s, cannot locate it: %s", network.slug, payment.address, exc)
    return transfers


def opening_balance(client: RpcClient, payment: PaymentRequest) -> int:
    """The coin on the deposit address before the order's start block, read once and kept."""
    if payment.opening_balance_base_units is not None:
        return int(payment.opening_balance_base_units)
    before = payment.start_block - 1
    balance = int(client.call("eth_getBalance", [payment.address, hex(before)]), 16) if before >= 0 else 0
    PaymentRequest.objects.filter(pk=payment.pk).update(opening_balance_base_units=balance)
    payment.opening_balance_base_units = balance
    return balance


def _find_forwarded(
    network: Network, client: RpcClient, asset: Asset, payment: PaymentRequest, credits: list[Credit], head: int
) -> list[Transfer]:
    opening = opening_balance(client, payment)

    def unexplained_at(number: int) -> bool:
        balance = int(client.call("eth_getBalance", [payment.address, hex(number)]), 16)
        return balance - opening > sum(int(c.amount_base_units) for c in credits if c.block_number <= number)

    low, high = payment.start_block, head  # the lowest block where the balance is unexplained
    while low < high:
        middle = (low + high) // 2
        if unexplained_at(middle):
            high = middle
        else:
            low = middle + 1
    block = client.call("eth_getBlockByNumber", [hex(low), False])
    traces = client.call("debug_traceBlockByNumber", [hex(low), CALL_TRACER])
    recipient = payment.address.lower()
    transfers = []
    for entry in traces:
        transfers += internal_transfers(
            network=network,
            asset=asset,
            block=block,
            tx_hash=entry["txHash"],
            trace=entry["result"],
            recipient=recipient,
        )
    return within_balance_gain(client=client, network=network, address=recipient, block_number=low, transfers=transfers)

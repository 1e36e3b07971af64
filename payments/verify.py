"""Checking the transaction a customer named: receipt status, chain, token contract (or native value),
Transfer topic, recipient = the order's address, block number and hash. Looked for on the order's
network first, then on every other offered network (money sent on the wrong chain is found too)."""

from __future__ import annotations

from django.utils import timezone

from payments.credits import TRANSFER_TOPIC, Transfer, address_topic, credit_record, topic_address
from payments.models import Asset, Network, Notice, PaymentRequest
from payments.native import traced_transfers_in_tx, transfer_from_tx
from payments.networks import networks_offered, rpc_client
from payments.rpc import RpcUnavailable


def transfers_in_tx(*, network: Network, payment: PaymentRequest, tx_hash: str) -> tuple[list[Transfer], str]:
    """The transfers of `tx_hash` on `network` that pay the payment's address, and what was found."""
    client = rpc_client(network)
    receipt = client.call("eth_getTransactionReceipt", [tx_hash])
    if receipt is None:
        return [], "not found"
    if int(receipt["status"], 16) != 1:
        return [], f"failed transaction on {network.name}: it moved nothing"
    block = client.call("eth_getBlockByNumber", [receipt["blockNumber"], False])
    if block is None or block["hash"].lower() != receipt["blockHash"].lower():
        return [], "its block is being reorganised; it will be checked again"
    recipient = payment.address.lower()
    tokens = {
        asset.contract.lower(): asset
        for asset in Asset.objects.filter(network=network, contract__isnull=False)
        if asset.contract is not None  # always: the filter's; said for mypy
    }
    transfers = []
    for entry in receipt["logs"]:
        topics = entry["topics"]
        if len(topics) != 3 or topics[0] != TRANSFER_TOPIC or topics[2].lower() != address_topic(recipient):
            continue
        transfers.append(
            Transfer(
                network=network,
                asset=tokens.get(entry["address"].lower()),  # None: a token the shop does not sell
                token=entry["address"].lower(),
                tx_hash=tx_hash,
                log_index=int(entry["logIndex"], 16),
                block_number=int(receipt["blockNumber"], 16),
                block_hash=receipt["blockHash"],
                block_timestamp=int(block["timestamp"], 16),
                sender=topic_address(topics[1]),
                recipient=recipient,
                amount=int(entry["data"][:66], 16),
                raw=entry,
            )
        )
    native = Asset.objects.filter(network=network, contract__isnull=True).first()
    if native is not None and (receipt.get("to") or "").lower() == recipient:
        tx = client.call("eth_getTransactionByHash", [tx_hash])
        if tx and int(tx["value"], 16) > 0:
            transfers.append(transfer_from_tx(network=network, asset=native, block=block, tx=tx))
    elif native is not None:  # coin a contract (a smart wallet, an exchange) forwarded inside the transaction
        transfers += traced_transfers_in_tx(
            network=network, client=client, asset=native, block=block, tx_hash=tx_hash, recipient=recipient
        )
    if not transfers:
        return [], f"found on {network.name}, but it pays another address"
    return transfers, f"found on {network.name} in block {int(receipt['blockNumber'], 16)}"


def notice_verify(*, notice_id: int) -> set[int]:
    """Check a notice's tx hash now; returns the payment ids to settle. RpcUnavailable is transient."""
    notice = Notice.objects.select_related("payment__asset__network").filter(pk=notice_id).first()
    if notice is None or not notice.tx_hash:
        return {notice.payment_id} if notice else set()
    payment = notice.payment
    home = payment.asset.network
    networks = [home] + [network for network in networks_offered() if network.pk != home.pk]
    results = []
    for network in networks:
        try:
            transfers, found = transfers_in_tx(network=network, payment=payment, tx_hash=notice.tx_hash)
        except RpcUnavailable:
            if network.pk == home.pk:
                raise  # the order's own network must answer; retry later
            continue
        if found == "not found":
            continue
        results.append(found)
        for transfer in transfers:
            credit_record(payment=payment, transfer=transfer)
        break
    Notice.objects.filter(pk=notice.pk).update(
        checked_at=timezone.now(), result=(results[0] if results else "not found on any offered network yet")[:300]
    )
    return {payment.pk}

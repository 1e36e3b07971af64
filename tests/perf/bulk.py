"""Many rows at once, for the cost tests and the benchmarks: open orders with their own deposit addresses,
nodes, credits, events and preparation runs, stored in bulk (no lot is reserved, no email is sent).

Bulk rows are never placed through order_create: thousands of checkouts would measure the checkout, not the
page or the scan under test. Their shape is what order_create stores.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.utils import timezone

from orders.models import Duration, Order, OrderEvent, Preparation, Reservation
from payments.addresses import derive_address, key_fingerprint
from payments.models import Asset, Credit, PaymentEvent, PaymentRequest
from provisioning.models import Node, PreparationRun

FIRST_BULK_INDEX = 1_000_000  # derivation indices far from the ones the checkout hands out


def open_orders_bulk(
    count: int,
    *,
    asset: Asset,
    first_index: int,
    start_block: int = 0,
    duration_days: int = 7,
    prefix: str = "B2-BULK-",
) -> list[PaymentRequest]:
    """`count` open orders paid in `asset`, each with its own deposit address, watched for a week."""
    if count <= 0:
        return []
    now = timezone.now()
    duration, preparation = Duration.objects.get(days=duration_days), Preparation.objects.first()
    price = duration.price_per_lot_usd
    orders = Order.objects.bulk_create(
        [
            Order(
                reference=f"{prefix}{first_index + i}",
                access_nonce=f"bulk-{prefix}{first_index + i}",
                lots=1,
                duration=duration,
                preparation=preparation,
                duration_days=duration_days,
                gpu_model="NVIDIA B200",
                gpus_per_lot=2,
                gpu_memory_gb=180,
                price_per_lot_usd=price,
                total_usd=price,
                first_name="Bulk",
                last_name="Buyer",
                email="bulk@example.org",
                ssh_public_key="-",
                ssh_key_fingerprint="-",
                terms_accepted_at=now,
            )
            for i in range(count)
        ],
        batch_size=1000,
    )
    fingerprint = key_fingerprint()
    network = asset.network
    rate = Decimal(1) if asset.usd_stable else Decimal(3000)
    return PaymentRequest.objects.bulk_create(
        [
            PaymentRequest(
                order=order,
                asset=asset,
                chain_id=network.chain_id,
                contract=asset.contract,
                decimals=asset.decimals,
                key_fingerprint=fingerprint,
                derivation_index=first_index + i,
                address=derive_address(first_index + i),
                amount_usd=price,
                usd_rate=rate,
                amount_base_units=int(price / rate * 10**asset.decimals),
                expires_at=now + dt.timedelta(minutes=30),
                watch_until=now + dt.timedelta(days=7),
                start_block=start_block,
            )
            for i, order in enumerate(orders)
        ],
        batch_size=1000,
    )


def nodes_bulk(count: int, *, prefix: str = "bulk-node-") -> list[Node]:
    return Node.objects.bulk_create(
        [Node(name=f"{prefix}{i}", driver="local", host="127.0.0.1") for i in range(count)], batch_size=1000
    )


def assets_bulk(count: int, *, network, prefix: str = "T") -> list[Asset]:
    """Extra enabled stablecoins on `network`, each with its own (fake) contract address."""
    return Asset.objects.bulk_create(
        [
            Asset(
                network=network,
                symbol=f"{prefix}{i}",
                name=f"Bulk token {i}",
                decimals=6,
                contract="0x" + f"{i + 1:040x}",
                usd_stable=True,
                enabled=True,
            )
            for i in range(count)
        ]
    )


def credits_bulk(payment: PaymentRequest, count: int, *, first_block: int = 1) -> list[Credit]:
    """`count` small transfers to the payment's address, as the scan records them."""
    now = timezone.now()
    return Credit.objects.bulk_create(
        [
            Credit(
                payment=payment,
                network=payment.asset.network,
                asset=payment.asset,
                chain_id=payment.chain_id,
                tx_hash="0x" + f"{payment.pk:016x}{first_block + i:048x}",
                log_index=0,
                block_number=first_block + i,
                block_hash="0x" + f"{first_block + i:064x}",
                block_timestamp=now,
                sender="0x" + "ab" * 20,
                amount_base_units=1,
                kind="match",
            )
            for i in range(count)
        ]
    )


def events_bulk(order: Order, count: int) -> None:
    """`count` recorded changes on the order and on its payment (audit rows only, statuses untouched)."""
    OrderEvent.objects.bulk_create(
        [OrderEvent(order=order, from_status="", to_status=order.status, actor="bulk") for _ in range(count)]
    )
    PaymentEvent.objects.bulk_create(
        [PaymentEvent(payment=order.payment, from_status="", to_status="pending", actor="bulk") for _ in range(count)]
    )


def runs_bulk(orders: list[Order], nodes: list[Node]) -> list[PreparationRun]:
    """One finished preparation run per (order, node) pair, zipped."""
    now = timezone.now()
    return PreparationRun.objects.bulk_create(
        [
            PreparationRun(order=order, node=node, status="passed", requested_by="bulk", finished_at=now)
            for order, node in zip(orders, nodes, strict=False)
        ]
    )


def released_holds_bulk(order: Order, nodes: list[Node]) -> list[Reservation]:
    """Past holds of `order` on `nodes`, released (as after a failed preflight moved the order on)."""
    now = timezone.now()
    return Reservation.objects.bulk_create(
        [Reservation(order=order, node=node, released_at=now, release_reason="bulk") for node in nodes]
    )

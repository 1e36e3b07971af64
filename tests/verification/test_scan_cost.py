"""A scan pass costs the same JSON-RPC calls for 1 and for 200 open orders: calls grow with block ranges,
not with the number of deposit addresses watched (see bench/scan_rpc_calls.py for larger counts)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.utils import timezone

from payments.addresses import derive_address, key_fingerprint
from payments.models import Asset, Network, PaymentRequest, ScanCursor
from payments.networks import rpc_client
from payments.scan import PassReport, scan_network
from shop.models import Duration, Order, Preparation
from tests.verification.helpers import units

BLOCKS = 20  # blocks mined between the transfers and the pass, the same in every run
FIRST_BULK_INDEX = 1_000_000  # far from the indices the checkout hands out


def open_usdc_orders(count: int, *, first_index: int, start_block: int) -> None:
    """`count` open orders in USDC with their own deposit addresses, stored in bulk (no lot is reserved)."""
    usdc = Asset.objects.select_related("network").get(network__slug="local", symbol="USDC")
    now = timezone.now()
    duration, preparation = Duration.objects.get(days=7), Preparation.objects.first()
    orders = Order.objects.bulk_create(
        [
            Order(
                reference=f"B2-BULK-{first_index + i}",
                access_nonce=f"bulk-{first_index + i}",
                lots=1,
                duration=duration,
                preparation=preparation,
                duration_days=7,
                gpu_model="NVIDIA B200",
                gpus_per_lot=2,
                gpu_memory_gb=180,
                price_per_lot_usd=duration.price_per_lot_usd,
                total_usd=duration.price_per_lot_usd,
                first_name="Bulk",
                last_name="Buyer",
                email="bulk@example.org",
                ssh_public_key="-",
                ssh_key_fingerprint="-",
                terms_accepted_at=now,
            )
            for i in range(count)
        ]
    )
    fingerprint = key_fingerprint()
    PaymentRequest.objects.bulk_create(
        [
            PaymentRequest(
                order=order,
                asset=usdc,
                chain_id=usdc.network.chain_id,
                contract=usdc.contract,
                decimals=6,
                key_fingerprint=fingerprint,
                derivation_index=first_index + i,
                address=derive_address(first_index + i),
                amount_usd=order.total_usd,
                usd_rate=Decimal(1),
                amount_base_units=int(order.total_usd * 10**6),
                expires_at=now + dt.timedelta(minutes=30),
                watch_until=now + dt.timedelta(days=7),
                start_block=start_block,
            )
            for i, order in enumerate(orders)
        ]
    )


def counted_pass(chain, customer, *, open_orders: int, first_index: int) -> tuple[int, int, PassReport]:
    """One paid order (two transfers) among `open_orders` open ones: (JSON-RPC calls, HTTP requests, report)."""
    network = Network.objects.get(slug="local")
    PaymentRequest.objects.update(watch_until=timezone.now() - dt.timedelta(days=1))  # earlier runs: closed
    start = chain.head()
    placed = customer.order()
    open_usdc_orders(open_orders - 1, first_index=first_index, start_block=start)
    assert PaymentRequest.objects.filter(watch_until__gte=timezone.now()).count() == open_orders
    half = units(placed) // 2
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], half)
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) - half)
    chain.mine(BLOCKS)
    ScanCursor.objects.update_or_create(network=network, defaults={"next_block": start})
    client = rpc_client(network)
    report = scan_network(network=network, client=client)
    assert PaymentRequest.objects.get(order__reference=placed["reference"]).status == "confirmed"
    return client.calls, client.requests, report


def test_a_scan_pass_makes_the_same_rpc_calls_for_1_and_for_200_open_orders(chain, customer):
    # Given one open order paid by two transfers, alone on the chain
    calls_1, requests_1, report_1 = counted_pass(chain, customer, open_orders=1, first_index=FIRST_BULK_INDEX)

    # When the same payment is scanned among 200 open orders, over as many blocks
    calls_200, requests_200, report_200 = counted_pass(
        chain, customer, open_orders=200, first_index=FIRST_BULK_INDEX + 1
    )

    # Then both passes read the same number of blocks, credited the same transfers, and cost the same calls
    assert report_1.to_block - report_1.from_block == report_200.to_block - report_200.from_block
    assert (report_1.logs, report_1.credited) == (report_200.logs, report_200.credited) == (2, 2)
    assert (calls_200, requests_200) == (calls_1, requests_1)
    # head, chain id, safe, one eth_getLogs, one block read per block of the range (native coin, batched),
    # and the two credits' receipts: nothing per open order
    blocks = report_1.to_block - report_1.from_block + 1
    assert calls_1 <= 4 + blocks + 2

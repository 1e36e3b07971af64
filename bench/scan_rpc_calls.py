"""JSON-RPC calls and wall time of one payment-scan pass, for 1, 100 and 1,000 open orders (and more
with --orders), against a real anvil. The calls must stay flat in the number of open orders.

    .venv/bin/python bench/scan_rpc_calls.py [--orders 1 100 1000 10000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = tempfile.mkdtemp(prefix="bench-scan-")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
os.environ["DATABASE_URL"] = f"sqlite:///{WORK}/bench.sqlite3"
os.environ["CELERY_BROKER_URL"] = "memory://"
os.environ["LOG_LEVEL"] = "WARNING"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

from tests.servers import Anvil  # noqa: E402

TRANSFERS = 3  # paid orders in every run: the same work, whatever the number of open orders
BLOCKS = 50  # blocks mined between the orders and the pass


def open_orders(count: int, *, first_index: int, start_block: int, usdc) -> list:
    from payments.addresses import derive_address, key_fingerprint
    from payments.checkout import payment_deadline
    from payments.models import PaymentRequest
    from shop.models import Duration, Order, Preparation

    now = timezone.now()
    duration, preparation = Duration.objects.get(days=3), Preparation.objects.first()
    orders = Order.objects.bulk_create(
        [
            Order(
                reference=f"BENCH-{first_index + i}",
                access_nonce=f"n{first_index + i}",
                lots=1,
                duration=duration,
                preparation=preparation,
                duration_days=3,
                gpu_model="NVIDIA B200",
                gpus_per_lot=2,
                gpu_memory_gb=180,
                price_per_lot_usd=Decimal(899),
                total_usd=Decimal(899),
                first_name="B",
                last_name="Bench",
                email="bench@example.org",
                ssh_public_key="-",
                ssh_key_fingerprint="-",
                terms_accepted_at=now,
            )
            for i in range(count)
        ]
    )
    fingerprint = key_fingerprint()
    return PaymentRequest.objects.bulk_create(
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
                amount_usd=Decimal(899),
                usd_rate=Decimal(1),
                amount_base_units=899_000_000,
                expires_at=payment_deadline(now),
                watch_until=payment_deadline(now) + timezone.timedelta(days=7),
                start_block=start_block,
            )
            for i, order in enumerate(orders)
        ]
    )


def measure(anvil: Anvil, count: int, first_index: int) -> dict:
    from payments.devnet import devnet_pay
    from payments.models import Asset, Network, PaymentRequest, ScanCursor
    from payments.networks import rpc_client
    from payments.scan import scan_network

    network = Network.objects.get(slug="local")
    usdc = Asset.objects.get(network=network, symbol="USDC")
    PaymentRequest.objects.update(watch_until=timezone.now() - timezone.timedelta(days=1))  # earlier runs: closed
    start = anvil.block_number()
    payments = open_orders(count, first_index=first_index, start_block=start, usdc=usdc)
    client = rpc_client(network)
    for payment in payments[:TRANSFERS]:
        devnet_pay(client=client, payment=payment)
    anvil.mine(BLOCKS)
    ScanCursor.objects.update_or_create(network=network, defaults={"next_block": start})
    counted = rpc_client(network)
    began = time.perf_counter()
    report = scan_network(network=network, client=counted)
    elapsed = time.perf_counter() - began
    return {
        "orders": count,
        "calls": counted.calls,
        "http": counted.requests,
        "blocks": report.to_block - start + 1,
        "credited": report.credited,
        "seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, nargs="+", default=[1, 100, 1000])
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    anvil = Anvil()
    os.environ["CHAIN_RPC_URLS_LOCAL"] = anvil.url
    try:
        from payments.devnet import devnet_setup
        from payments.models import Network
        from payments.networks import rpc_client

        devnet_setup(client=rpc_client(Network.objects.get(slug="local")))
        headers = [
            ("open orders", 12),
            ("JSON-RPC calls", 15),
            ("HTTP requests", 14),
            ("blocks", 7),
            ("credited", 9),
            ("pass (s)", 9),
        ]
        print(" ".join(title.rjust(width) for title, width in headers))
        first_index = 0
        for count in args.orders:
            row = measure(anvil, count, first_index)
            first_index += count
            print(
                f"{row['orders']:>12} {row['calls']:>15} {row['http']:>14} {row['blocks']:>7} {row['credited']:>9} "
                f"{row['seconds']:>9.3f}"
            )
    finally:
        anvil.stop()


if __name__ == "__main__":
    main()

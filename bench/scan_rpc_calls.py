"""The payment scan against a real anvil: JSON-RPC calls, log volume and wall time of one pass, and how many
blocks pass between a transfer's inclusion and its order becoming `paid` when the scan runs every K blocks.

1. Open orders: one pass over 1, 100, 1,000, 10,000 open orders (--orders), 3 of them paid: the calls must
   stay flat in the number of open orders.
2. Log volume: one pass over 1,000 open orders of which 3, 30, 300 are paid (--paid): the time a pass takes
   next to the number of logs it reads.
Every call goes through the provider emulator of the test suite (tests/payments/verification/rpc_proxy.py) in front of
anvil, with a mid-tier provider's limits (2,000-block log ranges, 100-call batches): the tables count the calls,
HTTP requests and bytes a pass costs there.

3. Detection latency: with N confirmations required and a scan every K blocks (--confirmations,
   --intervals), the blocks from inclusion to `confirmed`/`paid` must lie between N - 1 (the inclusion block
   is the first confirmation) and N - 1 + K - 1: the policy plus at most one scan interval.

    .venv/bin/python bench/scan_rpc_calls.py [--orders 1 100 1000 10000] [--paid 3 30 300]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import database_create, database_drop, postgres_url_required  # noqa: E402

SERVER = postgres_url_required("scan")
DATABASE = f"bench_scan_{os.getpid()}"
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
os.environ["DATABASE_URL"] = database_create(SERVER, DATABASE)
os.environ["CELERY_BROKER_URL"] = "memory://"
os.environ["LOG_LEVEL"] = "WARNING"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.common import markdown_table, write_results  # noqa: E402
from tests.payments.verification.rpc_proxy import RpcProxy  # noqa: E402
from tests.perf.bulk import FIRST_BULK_INDEX, open_orders_bulk  # noqa: E402
from tests.servers import Anvil  # noqa: E402

TRANSFERS = 3  # paid orders in every run of the first table: the same work, whatever the number of open orders
BLOCKS = 50  # blocks between the orders and the pass, the same in every row of a table


class Chain:
    """The local network on a fresh anvil, with its test tokens, and the bulk index of the next orders."""

    def __init__(self, anvil: Anvil) -> None:
        from payments.devnet import devnet_setup
        from payments.models import Asset, Network
        from payments.networks import rpc_client

        self.anvil = anvil
        self.network = Network.objects.get(slug="local")
        devnet_setup(client=rpc_client(self.network))
        self.usdc = Asset.objects.get(network=self.network, symbol="USDC")
        self.next_index = FIRST_BULK_INDEX

    def open_orders(self, count: int, *, start_block: int) -> list:
        """`count` new open orders; every earlier one is closed (no longer watched)."""
        from payments.models import PaymentRequest

        PaymentRequest.objects.update(watch_until=timezone.now() - timezone.timedelta(days=1), holds_money=False)
        payments = open_orders_bulk(count, asset=self.usdc, first_index=self.next_index, start_block=start_block)
        self.next_index += count
        return payments

    def pay(self, payment) -> int:
        """Pay in full from a development account (anvil mines it at once); the block that includes it."""
        from payments.devnet import devnet_pay
        from payments.networks import rpc_client

        client = rpc_client(self.network)
        tx_hash = devnet_pay(client=client, payment=payment)
        return int(client.call("eth_getTransactionReceipt", [tx_hash])["blockNumber"], 16)


def one_pass(chain: Chain, *, open_orders: int, paid: int, blocks: int = BLOCKS) -> dict:
    """One pass over `open_orders` open orders, `paid` of them paid, `blocks` blocks after they were placed."""
    from payments.models import ScanCursor
    from payments.native import FULL_BLOCKS_PER_REQUEST
    from payments.networks import rpc_client
    from payments.scan import scan_network

    start = chain.anvil.block_number()
    payments = chain.open_orders(open_orders, start_block=start)
    for payment in payments[:paid]:
        chain.pay(payment)
    used = chain.anvil.block_number() - start
    assert used < blocks, f"{paid} payments took {used} blocks: more than the {blocks} of the range"
    for _ in range(0, blocks - used, 100):  # the same range, however many were paid (in steps anvil answers fast)
        chain.anvil.mine(min(100, blocks - used - _))
    ScanCursor.objects.update_or_create(network=chain.network, defaults={"next_block": start})
    FULL_BLOCKS_PER_REQUEST.forget()  # every row sizes its full-block requests from the same start
    counted = rpc_client(chain.network)
    began = time.perf_counter()
    report = scan_network(network=chain.network, client=counted)
    elapsed = time.perf_counter() - began
    return {
        "open_orders": open_orders,
        "paid": min(paid, open_orders),
        "logs": report.logs,
        "calls": counted.calls,
        "http": counted.requests,
        "bytes": counted.response_bytes,
        "blocks": report.to_block - report.from_block + 1,
        "credited": report.credited,
        "seconds": round(elapsed, 4),
    }


def detection(chain: Chain, *, confirmations: int, interval: int, phase: int) -> dict:
    """Blocks between the transfer's inclusion and the pass that confirms it, with a pass every `interval`
    blocks and the transfer included `phase` blocks into the interval."""
    from payments.models import ScanCursor
    from payments.scan import scan_network

    chain.network.confirmations_required = confirmations
    chain.network.save(update_fields=["confirmations_required"])
    (payment,) = chain.open_orders(1, start_block=chain.anvil.block_number())
    ScanCursor.objects.update_or_create(network=chain.network, defaults={"next_block": chain.anvil.block_number()})
    origin = chain.anvil.block_number()  # a pass ran here; the next at origin + interval
    scan_network(network=chain.network)
    # devnet_pay mints, then transfers: the transfer lands two blocks later. Start so that it lands at `phase`.
    chain.anvil.mine((phase - 2) % interval)
    included = chain.pay(payment)
    head = chain.anvil.block_number()  # devnet_pay may have mined one more block after the transfer's
    passes = 0
    while head - included <= confirmations + 2 * interval:
        if (head - origin) % interval == 0:
            scan_network(network=chain.network)
            passes += 1
            payment.refresh_from_db()
            payment.order.refresh_from_db()
            if payment.status == "confirmed":
                break
        chain.anvil.mine(1)
        head += 1
    return {
        "confirmations_required": confirmations,
        "interval_blocks": interval,
        "phase": (included - origin) % interval,
        "blocks_to_confirmed": head - included,
        "payment": payment.status,
        "order": payment.order.status,
        "passes": passes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--paid", type=int, nargs="+", default=[3, 30, 300], help="paid among --paid-among orders")
    parser.add_argument("--paid-among", type=int, default=1000)
    parser.add_argument("--confirmations", type=int, nargs="+", default=[2, 12])
    parser.add_argument("--intervals", type=int, nargs="+", default=[1, 5, 15], help="blocks between passes")
    parser.add_argument("--phases", type=int, default=3, help="inclusion points tried per interval")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    anvil = Anvil()
    provider = RpcProxy(anvil.url)  # a mid-tier provider's limits
    provider.log_range_cap, provider.batch_cap = 2_000, 100
    os.environ["CHAIN_RPC_URLS_LOCAL"] = provider.url
    try:
        chain = Chain(anvil)
        by_orders = [one_pass(chain, open_orders=count, paid=TRANSFERS) for count in args.orders]
        blocks = 5 * max(args.paid) + BLOCKS  # room for the most payments (two to four blocks each)
        by_logs = [one_pass(chain, open_orders=args.paid_among, paid=paid, blocks=blocks) for paid in args.paid]
        latencies = []
        for confirmations in args.confirmations:
            for interval in args.intervals:
                phases = sorted({round(i * interval / args.phases) % interval for i in range(args.phases)})
                for phase in phases:
                    latencies.append(detection(chain, confirmations=confirmations, interval=interval, phase=phase))
    finally:
        provider.stop()
        anvil.stop()
        connections.close_all()
        database_drop(SERVER, DATABASE)
    report(by_orders, by_logs, latencies)


def report(by_orders: list[dict], by_logs: list[dict], latencies: list[dict]) -> None:
    first = by_orders[0]
    print("Scan pass by open orders (3 paid among them)\n")
    print(
        markdown_table(
            [
                "open orders",
                "logs",
                "JSON-RPC calls",
                "HTTP requests",
                "bytes",
                "blocks",
                "credited",
                "pass (s)",
                "x 1 order",
            ],
            [
                [
                    f"{r['open_orders']:,}",
                    r["logs"],
                    r["calls"],
                    r["http"],
                    f"{r['bytes']:,}",
                    r["blocks"],
                    r["credited"],
                    f"{r['seconds']:.3f}",
                    f"{r['seconds'] / first['seconds']:.1f}",
                ]
                for r in by_orders
            ],
        )
    )
    base = by_logs[0]
    print(f"\nScan pass by log volume ({base['open_orders']:,} open orders)\n")
    print(
        markdown_table(
            ["paid", "logs", "JSON-RPC calls", "HTTP requests", "bytes", "pass (s)", "logs x", "time x"],
            [
                [
                    r["paid"],
                    r["logs"],
                    r["calls"],
                    r["http"],
                    f"{r['bytes']:,}",
                    f"{r['seconds']:.3f}",
                    f"{r['logs'] / base['logs']:.0f}",
                    f"{r['seconds'] / base['seconds']:.1f}",
                ]
                for r in by_logs
            ],
        )
    )
    print("\nDetection latency: blocks from the transfer's inclusion to `confirmed` (order `paid`)\n")
    rows, within = [], True
    groups: dict[tuple[int, int], list[dict]] = {}
    for latency in latencies:
        groups.setdefault((latency["confirmations_required"], latency["interval_blocks"]), []).append(latency)
    for (confirmations, interval), group in groups.items():
        seen = [g["blocks_to_confirmed"] for g in group]
        low, high = confirmations - 1, confirmations - 1 + interval - 1
        ok = all(
            low <= g["blocks_to_confirmed"] <= high and (g["payment"], g["order"]) == ("confirmed", "paid")
            for g in group
        )
        within &= ok
        rows.append([confirmations, interval, ", ".join(map(str, seen)), f"{low}-{high}", "yes" if ok else "NO"])
    print(markdown_table(["N required", "scan every K blocks", "measured", "policy .. + one interval", "within"], rows))
    path = write_results(
        "scan",
        {
            "database": connections["default"].vendor,
            "by_open_orders": by_orders,
            "by_log_volume": by_logs,
            "detection_latency": latencies,
            "detection_within_policy_plus_one_interval": within,
        },
    )
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()

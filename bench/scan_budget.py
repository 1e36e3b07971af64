"""The scan's daily cost per network (issue 26), measured through the provider emulator in front of anvil.

For each of the six mainnets, the local anvil network takes that network's verification policy (its finality rule,
confirmations and max_block_range) and ten minutes are sampled: 40 passes SCAN_INTERVAL seconds apart, each after
the blocks the network makes in that time, with the production settings (a coin check every COIN_CHECK_SECONDS, an
idle head read every IDLE_PASS_SECONDS). The calls by method (counted by the emulator), the bytes it answered and
the providers' credits are multiplied up to a day. Each scenario's first pass (new addresses read in full once) is
run before the sample.

Bytes: anvil's blocks are empty, so a full block's transactions are added at the network's transactions per block
times the JSON size of an ERC-20 transfer measured here (a lower bound: swaps carry more calldata).

    .venv/bin/python bench/scan_budget.py [--intervals 15 60] [--networks ethereum ...] [--passes 40]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import database_create, database_drop, postgres_url_required  # noqa: E402

SERVER = postgres_url_required("budget")
DATABASE = f"bench_budget_{os.getpid()}"
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
os.environ["DATABASE_URL"] = database_create(SERVER, DATABASE)
os.environ["CELERY_BROKER_URL"] = "memory://"
os.environ["LOG_LEVEL"] = "ERROR"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.common import markdown_table, write_results  # noqa: E402
from tests.payments.verification.rpc_proxy import RpcProxy  # noqa: E402
from tests.perf.bulk import FIRST_BULK_INDEX, open_orders_bulk  # noqa: E402
from tests.servers import Anvil  # noqa: E402

SAMPLE_PASSES = 40
# Block time (s) and transactions per block, from the chains' own configuration and public daily counts
# (docs/performance.md, "What the scan costs a day"): an order of magnitude is what matters here.
NETWORKS = {
    "ethereum": (12.0, 200),
    "polygon": (2.0, 120),
    "bsc": (0.45, 70),
    "arbitrum": (0.25, 8),
    "base": (2.0, 170),
    "optimism": (2.0, 10),
}
# (name, open orders watched, of which in the network's own coin)
SCENARIOS = [("idle", 0, 0), ("10 token orders", 10, 0), ("10 orders, 2 in coin", 10, 2), ("100 orders", 100, 8)]
# Published weights per call: Alchemy compute units, Infura credits (eth_getTransactionCount is in neither
# table we read: priced as eth_getBalance).
ALCHEMY_CU = {
    "eth_blockNumber": 10,
    "eth_chainId": 0,
    "eth_getBlockByNumber": 20,
    "eth_getLogs": 60,
    "eth_getBalance": 20,
    "eth_getTransactionCount": 20,
    "eth_getTransactionReceipt": 20,
    "debug_traceTransaction": 40,
    "debug_traceBlockByNumber": 40,
}
INFURA_CREDITS = {
    "eth_blockNumber": 80,
    "eth_chainId": 5,
    "eth_getBlockByNumber": 80,
    "eth_getLogs": 255,
    "eth_getBalance": 80,
    "eth_getTransactionCount": 80,
    "eth_getTransactionReceipt": 80,
    "debug_traceTransaction": 1000,
    "debug_traceBlockByNumber": 1000,
}
INFURA_PLANS = [("Free", 3_000_000), ("Developer", 15_000_000), ("Team", 75_000_000)]  # credits a day


class Lab:
    """The local network on a fresh anvil behind the emulator, with its test tokens."""

    def __init__(self, anvil: Anvil) -> None:
        from payments.devnet import devnet_setup
        from payments.models import Asset, Network
        from payments.networks import rpc_client

        self.anvil = anvil
        self.proxy = RpcProxy(anvil.url)
        os.environ["CHAIN_RPC_URLS_LOCAL"] = self.proxy.url
        self.network = Network.objects.get(slug="local")
        devnet_setup(client=rpc_client(self.network))
        self.token = Asset.objects.get(network=self.network, symbol="USDC")
        self.coin = Asset.objects.get(network=self.network, contract__isnull=True)
        self.next_index = FIRST_BULK_INDEX
        self.tx_bytes = self._transfer_json_bytes()

    def _transfer_json_bytes(self) -> int:
        """The JSON size of one ERC-20 transfer inside a full block, as providers answer it."""
        from payments.devnet import devnet_pay

        (payment,) = self.open_orders(1, 0)
        tx_hash = devnet_pay(client=self._client(), payment=payment)
        # By hash, not "latest": a busy machine can mine an empty block between the receipt and this read.
        transaction = self.anvil.call("eth_getTransactionByHash", [tx_hash])
        if transaction is None:
            raise RuntimeError(f"the benchmark's payment {tx_hash} is not on its chain")
        return len(json.dumps(transaction))

    def _client(self):
        from payments.networks import rpc_client

        return rpc_client(self.network)

    def policy_of(self, slug: str) -> None:
        from payments.models import Network

        real = Network.objects.get(slug=slug)
        for field in ("finality", "confirmations_required", "max_block_range"):
            setattr(self.network, field, getattr(real, field))
        self.network.save()

    def open_orders(self, count: int, in_coin: int) -> list:
        """`count` open orders (`in_coin` of them in the network's coin); every earlier one closed."""
        from payments.models import CoinBaseline, PaymentRequest, ScanCursor

        PaymentRequest.objects.update(watch_until=timezone.now() - dt.timedelta(days=1), holds_money=False)
        ScanCursor.objects.filter(network=self.network).delete()
        CoinBaseline.objects.all().delete()
        head = self.anvil.block_number()
        payments = open_orders_bulk(in_coin, asset=self.coin, first_index=self.next_index, start_block=head)
        payments += open_orders_bulk(
            count - in_coin, asset=self.token, first_index=self.next_index + in_coin, start_block=head
        )
        self.next_index += count
        return payments


def ten_minutes(lab: Lab, *, slug: str, orders: int, in_coin: int, interval: int, passes: int) -> dict:
    """One scenario on one network: the emulator's counts over `passes` passes."""
    from payments.models import ScanCursor
    from payments.scan import scan_network

    block_seconds, txs_per_block = NETWORKS[slug]
    lab.policy_of(slug)
    lab.open_orders(orders, in_coin)
    start = timezone.now()
    scan_network(network=lab.network, now=start - dt.timedelta(seconds=interval))  # new addresses: read once
    # The coin check falls once, mid-sample, as it would on any ten minutes.
    ScanCursor.objects.filter(network=lab.network).update(coin_checked_at=start - dt.timedelta(seconds=300))
    proxy = lab.proxy
    proxy.methods.clear()
    proxy.batches = proxy.answer_bytes = proxy.full_blocks = proxy.http_requests = 0
    due = 0.0
    for n in range(passes):
        due += interval / block_seconds
        for _ in range(int(due) // 50):  # anvil answers a mine of 50 blocks well within the client's timeout
            lab.anvil.mine(50)
        if int(due) % 50:
            lab.anvil.mine(int(due) % 50)
        due -= int(due)
        scan_network(network=lab.network, now=start + dt.timedelta(seconds=n * interval))
    per_day = 86_400 / (passes * interval)
    methods = {method: count * per_day for method, count in proxy.methods.items()}
    transactions_bytes = proxy.full_blocks * txs_per_block * lab.tx_bytes  # what anvil's empty blocks lack
    calls_per_pass = sum(proxy.methods.values()) / passes
    bytes_per_pass = (proxy.answer_bytes + transactions_bytes) / passes
    print(
        f"  {slug}, {orders} orders ({in_coin} in coin), every {interval} s: {calls_per_pass:.1f} calls and "
        f"{bytes_per_pass / 1000:.1f} kB a pass",
        file=sys.stderr,
        flush=True,
    )
    return {
        "network": slug,
        "orders": orders,
        "in_coin": in_coin,
        "interval_seconds": interval,
        "calls_per_pass": round(calls_per_pass, 1),
        "bytes_per_pass": round(bytes_per_pass),
        "calls_per_day": round(sum(methods.values())),
        "requests_per_day": round(proxy.http_requests * per_day),
        "batches_per_day": round(proxy.batches * per_day),
        "full_blocks_per_day": round(proxy.full_blocks * per_day),
        "methods_per_day": {method: round(count) for method, count in sorted(methods.items())},
        "mb_per_day": round((proxy.answer_bytes + transactions_bytes) * per_day / 1e6, 1),
        "alchemy_cu_per_day": round(sum(ALCHEMY_CU.get(m, 20) * c for m, c in methods.items())),
        "infura_credits_per_day": round(sum(INFURA_CREDITS.get(m, 80) * c for m, c in methods.items())),
    }


def infura_plan(credits_per_day: float) -> str:
    return next((name for name, allowance in INFURA_PLANS if credits_per_day <= allowance), "over Team")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--intervals", type=int, nargs="+", default=[15, 60], help="seconds between passes")
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--passes", type=int, default=SAMPLE_PASSES, help="passes sampled per scenario")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    anvil = Anvil()
    try:
        lab = Lab(anvil)
        rows = [
            ten_minutes(lab, slug=slug, orders=orders, in_coin=in_coin, interval=interval, passes=args.passes)
            for interval in args.intervals
            for _name, orders, in_coin in SCENARIOS
            for slug in args.networks
        ]
        tx_bytes = lab.tx_bytes
        lab.proxy.stop()
    finally:
        anvil.stop()
        connections.close_all()
        database_drop(SERVER, DATABASE)
    report(rows, tx_bytes)


def report(rows: list[dict], tx_bytes: int) -> None:
    names = {(orders, in_coin): name for name, orders, in_coin in SCENARIOS}
    print(f"Per network, a pass and a day (an ERC-20 transfer is {tx_bytes} bytes of JSON in a full block)\n")
    print(
        markdown_table(
            [
                "every",
                "scenario",
                "network",
                "calls a pass",
                "kB a pass",
                "calls",
                "full blocks",
                "MB",
                "Alchemy CU",
                "Infura credits",
            ],
            [
                [
                    f"{r['interval_seconds']} s",
                    names[(r["orders"], r["in_coin"])],
                    r["network"],
                    f"{r['calls_per_pass']:,}",
                    f"{r['bytes_per_pass'] / 1000:,.1f}",
                    f"{r['calls_per_day']:,}",
                    f"{r['full_blocks_per_day']:,}",
                    f"{r['mb_per_day']:,}",
                    f"{r['alchemy_cu_per_day']:,}",
                    f"{r['infura_credits_per_day']:,}",
                ]
                for r in rows
            ],
        )
    )
    totals = {}
    for r in rows:
        key = (r["interval_seconds"], names[(r["orders"], r["in_coin"])])
        total = totals.setdefault(key, {"calls": 0, "mb": 0.0, "cu": 0, "credits": 0})
        total["calls"] += r["calls_per_day"]
        total["mb"] += r["mb_per_day"]
        total["cu"] += r["alchemy_cu_per_day"]
        total["credits"] += r["infura_credits_per_day"]
    networks = len({r["network"] for r in rows})
    print(f"\n{networks} networks together, a day (Alchemy pay-as-you-go at $0.45 per million CU, 30 days a month)\n")
    print(
        markdown_table(
            ["every", "scenario", "calls", "MB", "Alchemy CU", "Alchemy $/month", "Infura credits", "Infura plan"],
            [
                [
                    f"{interval} s",
                    name,
                    f"{t['calls']:,}",
                    f"{t['mb']:,.0f}",
                    f"{t['cu']:,}",
                    f"{t['cu'] * 30 / 1e6 * 0.45:,.0f}",
                    f"{t['credits']:,}",
                    infura_plan(t["credits"]),
                ]
                for (interval, name), t in totals.items()
            ],
        )
    )
    path = write_results("scan_budget", {"per_network_day": rows, "erc20_transfer_json_bytes": tx_bytes})
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()

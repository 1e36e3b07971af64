"""What a long history costs: staff pages and periodic passes on PostgreSQL with 1,000, 10,000 and 100,000 orders
seeded in bulk (63 % expired, 33 % paid and ended with their credit and sweep, 4 % refunded; node checks and
health probes beside them), after VACUUM ANALYZE. At every size the last 8 days hold the same 300 orders (the
scan's watch window: the open work); only the history before them grows. Each path: the median of 5 warm runs and
its statement count.

    .venv/bin/python bench/history.py [--orders 1000 100000] [--runs 5]

Needs PostgreSQL (DATABASE_URL or the local one); a database of its own is created and dropped. No chain: the
treasury plan reads its balances from an anvil of the run's own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, write_results  # noqa: E402
from bench.databases import database_create, database_drop, postgres_url_required  # noqa: E402
from tests.servers import Anvil  # noqa: E402

NODES = 20
BATCH = 5_000
RECENT = 300  # orders placed in the last WINDOW_DAYS: what the scan watches, at every size
WINDOW_DAYS = 8  # PAYMENT_WATCH_DAYS (7) and a day


def _placed_at(now: dt.datetime, i: int, count: int) -> dt.datetime:
    """Order i of count, oldest first: the history before the watch window, then RECENT orders inside it."""
    window, recent = dt.timedelta(days=WINDOW_DAYS), min(RECENT, count // 2)  # the suite's smoke run seeds 200
    older = count - recent
    if i < older:
        return now - window - dt.timedelta(days=365) * ((older - i) / older)
    return now - window * ((count - i) / recent)


def seed(count: int) -> None:
    """`count` orders with the shapes a year of sales leaves behind, stored in bulk."""
    from decimal import Decimal

    from django.db import connection
    from django.db.models import F
    from django.utils import timezone

    from orders.models import Duration, Order, OrderEvent, OrderStatus, Preparation
    from payments.addresses import key_fingerprint
    from payments.models import (
        Asset,
        Credit,
        CreditKind,
        Network,
        PaymentRequest,
        PaymentStatus,
        Refund,
        RefundStatus,
        Sweep,
    )
    from provisioning.models import CheckKind, Node, NodeCheck, NodeHealth

    now = timezone.now()
    network = Network.objects.get(slug="local")
    usdc = Asset.objects.get(network=network, symbol="USDC")
    duration, preparation = Duration.objects.get(days=7), Preparation.objects.first()
    fingerprint, price = key_fingerprint(), duration.price_per_lot_usd
    nodes = Node.objects.bulk_create(
        [Node(name=f"hist-node-{i}", driver="local", host="127.0.0.1") for i in range(NODES)]
    )
    for first in range(0, count, BATCH):
        span = range(first, min(count, first + BATCH))
        # 63 % expired, 33 % ended, the rest refunded after a cancellation. The last RECENT orders fill the scan's
        # watch window (the open work, the same at every size); the rest spread over the year before it.
        created = {i: _placed_at(now, i, count) for i in span}
        kind = {i: "expired" if i % 100 < 63 else "ended" if i % 100 < 96 else "refunded" for i in span}
        status = {"expired": OrderStatus.EXPIRED, "ended": OrderStatus.ENDED, "refunded": OrderStatus.CANCELLED}
        orders = Order.objects.bulk_create(
            [
                Order(
                    reference=f"B2-HIST-{i:07d}", access_nonce=f"hist-{i}", lots=1, duration=duration,
                    preparation=preparation, duration_days=7, gpu_model="NVIDIA B200", gpus_per_lot=2,
                    gpu_memory_gb=180, price_per_lot_usd=price, total_usd=price, first_name="Hist",
                    last_name=f"Buyer{i}", email=f"buyer{i % 5000}@example.org", ssh_public_key="-",
                    ssh_key_fingerprint="-", terms_accepted_at=created[i], created_at=created[i],
                    status=status[kind[i]],
                )
                for i in span
            ],
            batch_size=1000,
        )  # fmt: skip
        OrderEvent.objects.bulk_create(
            [OrderEvent(order=o, to_status=o.status, actor="system", created_at=o.created_at) for o in orders],
            batch_size=1000,
        )
        payments = PaymentRequest.objects.bulk_create(
            [
                PaymentRequest(
                    order=o, asset=usdc, chain_id=network.chain_id, contract=usdc.contract, decimals=6,
                    key_fingerprint=fingerprint, derivation_index=2_000_000 + i, address="0x" + f"{i:040x}",
                    amount_usd=price, usd_rate=Decimal(1), amount_base_units=int(price * 10**6),
                    expires_at=o.created_at + dt.timedelta(minutes=30),
                    watch_until=o.created_at + dt.timedelta(days=7, minutes=30), start_block=0,
                    created_at=o.created_at,
                    status=PaymentStatus.PENDING if kind[i] == "expired" else PaymentStatus.CONFIRMED,
                    settled_at=None if kind[i] == "expired" else o.created_at + dt.timedelta(minutes=10),
                )
                for i, o in zip(span, orders, strict=True)
            ],
            batch_size=1000,
        )  # fmt: skip
        paid = [(i, p) for i, p in zip(span, payments, strict=True) if kind[i] != "expired"]
        Credit.objects.bulk_create(
            [
                Credit(
                    payment=p, network=network, asset=usdc, chain_id=network.chain_id, token_contract=usdc.contract,
                    tx_hash="0x" + f"{i:064x}", log_index=0, block_number=i + 1, block_hash="0x" + "ab" * 32,
                    block_timestamp=p.created_at + dt.timedelta(minutes=5), sender="0x" + "22" * 20,
                    amount_base_units=p.amount_base_units, kind=CreditKind.MATCH, final=True, confirmations=64,
                )
                for i, p in paid
            ],
            batch_size=1000,
        )  # fmt: skip
        swept = [(i, p) for i, p in paid if kind[i] == "ended"]
        Sweep.objects.bulk_create(
            [
                Sweep(
                    payment=p, network=network, chain_id=network.chain_id, token_contract=usdc.contract,
                    tx_hash="0x" + f"{count + i:064x}", log_index=0, block_number=count + i,
                    block_hash="0x" + "cd" * 32,
                    to_address="0x" + "99" * 20, amount_base_units=p.amount_base_units, final=True,
                    created_at=p.created_at + dt.timedelta(days=8),
                )
                for i, p in swept
            ],
            batch_size=1000,
        )  # fmt: skip
        Refund.objects.bulk_create(
            [
                Refund(
                    payment=p, reason="cancelled", network=network, chain_id=network.chain_id,
                    token_contract=usdc.contract, symbol="USDC", decimals=6, amount_base_units=p.amount_base_units,
                    to_address="0x" + "33" * 20, status=RefundStatus.CONFIRMED, tx_hash="0x" + f"{2 * count + i:064x}",
                    block_number=2 * count + i, created_at=p.created_at + dt.timedelta(hours=2),
                    sent_at=p.created_at + dt.timedelta(hours=2),
                )
                for i, p in paid
                if kind[i] == "refunded"
            ],
            batch_size=1000,
        )  # fmt: skip
    # Node checks at 50 a day over the year's share of the history, and a fortnight of rented nodes' probes.
    checks = max(NODES, count // 2)
    NodeCheck.objects.bulk_create(
        [
            NodeCheck(
                node=nodes[i % NODES], kind=CheckKind.PROBE, requested_by="system", passed=True,
                created_at=now - dt.timedelta(minutes=i), finished_at=now - dt.timedelta(minutes=i),
            )
            for i in range(checks)
        ],
        batch_size=BATCH,
    )  # fmt: skip
    NodeHealth.objects.bulk_create(
        [
            NodeHealth(node=nodes[i % 4], checked_at=now - dt.timedelta(minutes=5 * (i // 4)), reachable=True,
                       healthy=True)
            for i in range(4 * 12 * 24 * 14)
        ],
        batch_size=BATCH,
    )  # fmt: skip
    # bulk_create stamps `updated_at` with today: each order was last changed when its year placed it
    Order.objects.update(updated_at=F("created_at"))
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def paths(network) -> list[tuple[str, object]]:
    """Each path as a callable that fails loudly on a wrong answer."""
    from django.test import Client
    from django.utils import timezone

    from payments.ledger import ledger_movements, ledger_totals_in_database
    from payments.models import PaymentRequest
    from payments.reconfirm import final_credits_watched
    from payments.settle import payments_out_of_step
    from payments.treasury import treasury_plan
    from shop.order_lookup import orders_of_email_key
    from shop.retention import history_prune

    client = Client()
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="hist-admin"))

    def page(url: str, *, streamed: bool = False):
        def get():
            answer = client.get(url)
            assert answer.status_code == 200, (url, answer.status_code)
            return b"".join(answer.streaming_content) if streamed else answer.content

        return get

    now = timezone.now()
    return [
        ("`/ops/`", page("/ops/")),
        ("`/admin/ledger/` page 1", page("/admin/ledger/")),
        ("of which: the ledger's totals", lambda: ledger_totals_in_database()),
        ("of which: the ledger's first 200 rows", lambda: list(islice(ledger_movements(chunk=200), 200))),
        ("treasury plan, one network", lambda: treasury_plan(network=network)),
        ("ledger CSV, default range (31 days)", page("/api/v1/treasury/ledger.csv", streamed=True)),
        ("ledger CSV, whole", page("/api/v1/treasury/ledger.csv?from=2000-01-01", streamed=True)),
        ("admin orders", page("/admin/orders/order/")),
        ("admin payments", page("/admin/payments/paymentrequest/")),
        ("admin sweeps", page("/admin/payments/sweep/")),
        ("admin credits", page("/admin/payments/credit/")),
        ("admin order events", page("/admin/orders/orderevent/")),
        ("`/metrics`", page("/metrics")),
        ("scan: watched payments", lambda: list(PaymentRequest.objects.watched(now).values_list("pk", flat=True))),
        ("scan: payments out of step", lambda: payments_out_of_step(now=now)),
        ("scan: final credits in the reorg watch", lambda: final_credits_watched(network, now)),
        ("find my order, unknown address", lambda: list(orders_of_email_key("nobody@example.org"))),
        # Last: its first run removes what the seeded year holds past its time (the unpaid orders above all)
        ("retention pass (nothing due; its first run: the year's backlog)", lambda: history_prune(now=now)),
    ]


class _Statements:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


def measure(count: int, runs: int) -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from payments.models import Network

    began = time.perf_counter()
    seed(count)
    print(f"  seeded {count} orders in {time.perf_counter() - began:.0f} s", flush=True)
    get_user_model().objects.create_superuser("hist-admin", "admin@example.org", "a-long-bench-password")
    results = []
    for label, call in paths(Network.objects.get(slug="local")):
        start = time.perf_counter()
        call()  # warm: statements prepared, caches filled as in a running shop (the retention pass: its work)
        first_ms = round((time.perf_counter() - start) * 1000, 1)
        statements = _Statements()  # a wrapper counts: a request's start empties connection.queries
        with connection.execute_wrapper(statements):
            call()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1000)
        results.append({"path": label, "orders": count, "ms": round(statistics.median(times), 1),
                        "queries": statements.count, "first_ms": first_ms})  # fmt: skip
        print(f"  {label}: {results[-1]['ms']} ms, {results[-1]['queries']} queries (first {first_ms} ms)", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    admin_url = postgres_url_required("history")
    anvil = Anvil()
    os.environ.update({"DJANGO_SETTINGS_MODULE": "config.settings.test", "CHAIN_RPC_URLS_LOCAL": anvil.url,
                       "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL", "memory://")})  # fmt: skip
    by_size: list[dict] = []
    try:
        for count in args.orders:
            name = f"bench_history_{os.getpid()}_{count}"
            os.environ["DATABASE_URL"] = database_create(admin_url, name)
            print(f"{count} orders:", flush=True)
            by_size += _in_fresh_process(count, args.runs)
            database_drop(admin_url, name)
    finally:
        anvil.stop()
    sizes = args.orders
    rows = []
    for label in dict.fromkeys(result["path"] for result in by_size):
        cells = {r["orders"]: r for r in by_size if r["path"] == label}
        rows.append([label, *(f"{cells[n]['ms']} ms, {cells[n]['queries']} q" for n in sizes)])
    print(markdown_table(["path", *(f"{n:,} orders" for n in sizes)], rows))
    write_results("history", {"results": by_size})


def _in_fresh_process(count: int, runs: int) -> list[dict]:
    """Each size in its own process: Django is set up once per database."""
    import json
    import subprocess

    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=os.environ, check=True, cwd=ROOT)
    code = (
        f"import json, sys, django; sys.path.insert(0, {str(ROOT)!r}); django.setup();"
        " from bench.history import _devnet, measure; _devnet();"
        f" print('RESULTS' + json.dumps(measure({count}, {runs})))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=os.environ, cwd=ROOT, capture_output=True, text=True)
    sys.stdout.write("\n".join(line for line in out.stdout.splitlines() if not line.startswith("RESULTS")) + "\n")
    if out.returncode != 0:
        sys.exit(f"history: the run at {count} orders failed:\n{out.stderr[-4000:]}")
    return json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RESULTS"))[7:])


def _devnet() -> None:
    from payments.devnet import devnet_setup
    from payments.models import Network
    from payments.networks import rpc_client

    devnet_setup(client=rpc_client(Network.objects.get(slug="local")))


if __name__ == "__main__":
    main()

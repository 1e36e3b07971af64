"""Pages and API under load, each as a ratio against a bare Django view served by the same gunicorn.

Each endpoint has its own target, a share of the baseline's req/s (TARGETS), and every p99 stays under 10 x the
baseline's. The order API is loaded twice: plain (200, the full body) and conditional (the ETag of a first GET
sent back in If-None-Match: 304, no body, as the order page polls it).

gunicorn runs the production settings (bench/settings.py adds only the baseline's URL, the run's static
folder and the run's own Celery queue) on a database of its own (`bench_shop_<pid>`, created on the
PostgreSQL of DATABASE_URL, or the local one, and dropped at the end), with a real anvil and Redis.
bench/loadgen.py drives it from a second process. Then the peak RSS of the web workers, and of a Celery
worker after it has run the batch the load left (one email per placed order) and a scan pass.

    .venv/bin/python bench/load.py [--duration 5] [--warmup 2] [--connections 8] [--workers 2]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, write_results  # noqa: E402
from bench.databases import database_create, database_drop, postgres_url_required  # noqa: E402
from tests.servers import Anvil, free_port  # noqa: E402

LOCAL_REDIS = "redis://127.0.0.1:6379/0"
PROXY = {"X-Forwarded-Proto": "https"}  # as the TLS-terminating proxy says: no redirect to https
P99_TARGET = 10.0  # x the baseline's p99, for every endpoint
# Each endpoint's floor, as a share of the baseline's req/s measured right before it.
TARGETS = {
    "home": 0.50,
    "catalog page": 0.50,
    "catalog API": 0.50,
    "order status page": 0.25,
    "payment page": 0.25,
    "order API": 0.25,
    "order API 304": 0.50,
    "order placement": 0.10,
}


# --- servers -------------------------------------------------------------------------------------------


def redis_url() -> str:
    import redis

    url = os.environ.get("CELERY_BROKER_URL", "")
    url = url if url.startswith("redis://") else LOCAL_REDIS
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        sys.exit(f"bench: Redis at {url} does not answer ({exc}); set CELERY_BROKER_URL")
    finally:
        client.close()
    return url


def account_xpub() -> str:
    """A fresh account-level xpub whose seed is thrown away: the run's own, never the development key."""
    from bip_utils import Bip44, Bip44Coins

    account = Bip44.FromSeed(secrets.token_bytes(64), Bip44Coins.ETHEREUM).Purpose().Coin().Account(0)
    return account.PublicKey().ToExtended()


def production_env(*, database_url: str, broker: str, anvil: Anvil, work: Path, queue: str) -> dict[str, str]:
    """The production settings with keys of this run's own, rate limits off, its database, queue and chain."""
    return {
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "PAYMENTS_XPUB": account_xpub(),
        "MANIFEST_SIGNING_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        "RATELIMIT_ENABLE": "0",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker,
        "CHAIN_RPC_URLS_LOCAL": anvil.url,
        "BENCH_STATIC_ROOT": str(work / "static"),
        "BENCH_QUEUE": queue,
        "LOG_LEVEL": "WARNING",
    }


def peak_rss_kib(pid: int) -> int:
    """VmHWM: the most resident memory the process ever had."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def wait_until(condition, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} within {seconds} s")


@dataclass(frozen=True)
class BenchRun:
    """What one run of a server benchmark owns, removed when it ends: a database, a queue, a folder, a chain."""

    admin_url: str
    database: str
    env: dict[str, str]
    work: Path
    queue: str
    broker: str
    anvil: Anvil


@contextlib.contextmanager
def bench_run(kind: str) -> Iterator[BenchRun]:
    """The production environment on a database, queue, folder and anvil of the run's own, migrated, with
    Django set up in this process; all of them removed at the end, however the run ends."""
    admin_url = postgres_url_required("bench")
    broker = redis_url()
    name = f"bench_{kind}_{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    queue = f"bench-{os.getpid()}"
    database_url = database_create(admin_url, name)
    anvil = Anvil()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PAYMENTS_", "CHAIN_RPC_URLS_"))},
        **production_env(database_url=database_url, broker=broker, anvil=anvil, work=work, queue=queue),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(work / "emails"),
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update(env)
    try:
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True, cwd=ROOT)
        subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], env=env, check=True, cwd=ROOT)
        import django

        django.setup()
        yield BenchRun(admin_url, name, env, work, queue, broker, anvil)
    finally:
        anvil.stop()
        _queue_delete(broker, queue)
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001, S110 - Django may not be set up if the run failed early
            pass
        database_drop(admin_url, name)
        shutil.rmtree(work, ignore_errors=True)


def gunicorn_start(run: BenchRun, port: int, workers: int) -> subprocess.Popen:
    """The shop as production serves it: sync workers on the production settings."""
    command = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--workers", str(workers)]
    command += ["--worker-class", "sync", "--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
    web_log = (run.work / "gunicorn.log").open("wb")
    return subprocess.Popen(command, cwd=ROOT, env=run.env, stdout=web_log, stderr=subprocess.STDOUT)


def process_stop(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


# --- the shop's data -----------------------------------------------------------------------------------


def http(port: int, path: str, *, body: dict | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        headers={**PROXY, **({"Content-Type": "application/json"} if data else {}), **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def order_body() -> dict:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return {
        "lots": 1,
        "duration_days": 7,
        "preparation": "pytorch-blackwell",
        "first_name": "Ada",
        "last_name": "Lovelace",
        "email": "ada@example.org",
        "ssh_public_key": f"{line} bench@lab",
        "network": "local",
        "asset": "USDC",
    }


def seed(*, nodes: int, open_orders: int) -> None:
    """Tokens on the chain, free nodes for the orders the load places, and other open orders around them."""
    from payments.devnet import devnet_setup
    from payments.models import Asset, Network
    from payments.networks import rpc_client
    from tests.perf.bulk import FIRST_BULK_INDEX, nodes_bulk, open_orders_bulk

    network = Network.objects.get(slug="local")
    devnet_setup(client=rpc_client(network))
    nodes_bulk(nodes, prefix="bench-node-")
    usdc = Asset.objects.get(network=network, symbol="USDC")
    open_orders_bulk(open_orders, asset=usdc, first_index=FIRST_BULK_INDEX, prefix="B2-BENCH-")
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # production's autovacuum keeps statistics; a fresh bulk load has none


def pay_and_confirm(reference: str, anvil: Anvil) -> str:
    """Pay the order from a development account, let it confirm, and run the scan pass that settles it."""
    from payments.devnet import devnet_pay
    from payments.models import Network, PaymentRequest
    from payments.networks import rpc_client
    from payments.scan import scan_network

    network = Network.objects.get(slug="local")
    payment = PaymentRequest.objects.select_related("order").get(order__reference=reference, extension=None)
    devnet_pay(client=rpc_client(network), payment=payment)
    anvil.mine(network.confirmations_required + 64)  # past the `safe` tag too
    scan_network(network=network)
    payment.refresh_from_db()
    payment.order.refresh_from_db()
    return f"{payment.status}/{payment.order.status}"


# --- measuring -----------------------------------------------------------------------------------------


def etag_of(port: int, path: str, headers: dict) -> str | None:
    """The ETag of a plain GET (None when the answer has none)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={**PROXY, **headers})
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
        return response.headers.get("ETag")


def load(port: int, path: str, args, *, method: str = "GET", body: dict | None = None, headers=None) -> dict:
    command = [
        sys.executable,
        str(ROOT / "bench" / "loadgen.py"),
        "--port",
        str(port),
        "--path",
        path,
        "--method",
        method,
        "--connections",
        str(args.connections),
        "--warmup",
        str(args.warmup),
        "--duration",
        str(args.duration),
    ]
    for name, value in {**PROXY, **(headers or {})}.items():
        command += ["--header", f"{name}: {value}"]
    if body is not None:
        command += ["--body", json.dumps(body)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=args.warmup + args.duration + 120, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds measured per endpoint")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per endpoint")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers")
    parser.add_argument("--nodes", type=int, default=1000, help="free nodes: one per order the load places")
    parser.add_argument("--open-orders", type=int, default=1000, help="other open orders in the database")
    args = parser.parse_args()

    gunicorn = None
    with bench_run("shop") as run:
        try:
            seed(nodes=args.nodes, open_orders=args.open_orders)
            from django.db import connection

            connection.close()
            port = free_port()
            gunicorn = gunicorn_start(run, port, args.workers)
            wait_until(lambda: _answers(port), "gunicorn answers /bench/baseline/", 60)
            measured = measure(port, run, args)
            web_rss = {pid: peak_rss_kib(pid) for pid in children_of(gunicorn.pid)}
            celery = celery_batch(run.env, run.work, run.queue, run.broker)
        finally:
            process_stop(gunicorn)
    report(measured, web_rss, celery, args)


def measure(port: int, run: BenchRun, args) -> list[dict]:
    """Every endpoint under load, each right after a window of the baseline."""
    from django.db import connection

    body = order_body()
    placed = {}
    for label in ("awaiting", "paid"):
        status, content = http(port, "/api/v1/orders/", body=body)
        assert status == 201, content[:500]
        placed[label] = json.loads(content)
    settled = pay_and_confirm(placed["paid"]["reference"], run.anvil)
    connection.close()
    assert settled == "confirmed/paid", settled

    def path_of(url: str) -> str:
        return urlsplit(url).path

    paid = placed["paid"]
    order_api = f"/api/v1/orders/{paid['reference']}/"
    token = {"X-Order-Token": paid["access_token"]}
    # The page's conditional poll: the ETag of a first read, sent back (None while the API serves none).
    etag = etag_of(port, order_api, token)
    conditional = {**token, "If-None-Match": etag} if etag else None
    # (label, path, method, body, headers, key in TARGETS, the statuses that count as served)
    endpoints = [
        ("home `/`", "/", "GET", None, None, "home", "2xx"),
        ("catalog page `/order/`", "/order/", "GET", None, None, "catalog page", "2xx"),
        ("order status page (paid)", path_of(paid["status_url"]), "GET", None, None, "order status page", "2xx"),
        (
            "payment page (awaiting, QR)",
            path_of(placed["awaiting"]["status_url"]),
            "GET",
            None,
            None,
            "payment page",
            "2xx",
        ),
        ("`GET /api/v1/catalog/`", "/api/v1/catalog/", "GET", None, None, "catalog API", "2xx"),
        ("`GET /api/v1/orders/<ref>/`", order_api, "GET", None, token, "order API", "2xx"),
        (
            "`GET /api/v1/orders/<ref>/` with If-None-Match (304)",
            order_api,
            "GET",
            None,
            conditional,
            "order API 304",
            "304",
        ),
        ("`POST /api/v1/orders/`", "/api/v1/orders/", "POST", body, None, "order placement", "2xx"),
    ]
    measured = []
    base_label, base_path = "baseline: bare view, fixed JSON (median run)", "/bench/baseline/"
    for label, path, method, payload, headers, target, expected in endpoints:
        if expected == "304" and headers is None:
            skipped = "not measured: the order API serves no ETag yet"
            measured.append({"label": label, "path": path, "target": target, "skipped": skipped})
            print(f"  {label}: {skipped}", flush=True)
            continue
        # The baseline again right before each endpoint: the machine is shared, and its load drifts
        # within a run; each ratio compares two windows a few seconds apart.
        base = load(port, base_path, args)
        base.update(label=base_label, path=base_path, target=None, expected="2xx")
        result = load(port, path, args, method=method, body=payload, headers=headers)
        result.update(label=label, path=path, target=target, expected=expected, baseline=base)
        measured.append(result)
        print(
            f"  {label}: {result['rps']:.0f} req/s (baseline {base['rps']:.0f}), statuses {result['statuses']}",
            flush=True,
        )
    return measured


def _answers(port: int) -> bool:
    try:
        return http(port, "/bench/baseline/")[0] == 200
    except OSError:
        return False


def _queue_delete(broker: str, queue: str) -> None:
    import redis

    client = redis.Redis.from_url(broker, socket_connect_timeout=2)
    try:
        client.delete(queue, f"_kombu.binding.{queue}")
    finally:
        client.close()


def celery_batch(env: dict, work: Path, queue: str, broker: str) -> dict:
    """A worker on the run's queue: the emails of every order the load placed, then one scan pass over all
    open orders. Its peak RSS once the queue is empty and the pass is recorded."""
    import redis

    from payments.models import ScanCursor
    from payments.tasks import scan_all_networks_task

    client = redis.Redis.from_url(broker)
    waiting = client.llen(queue)
    before = ScanCursor.objects.values_list("last_pass_at", flat=True).first()
    scan_all_networks_task.apply_async(queue=queue)
    log = (work / "celery.log").open("wb")
    began = time.monotonic()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            "solo",
            "-Q",
            queue,
            "--hostname",
            f"{queue}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        def drained() -> bool:
            assert worker.poll() is None, (work / "celery.log").read_text()[-3000:]
            last = ScanCursor.objects.values_list("last_pass_at", flat=True).first()
            return client.llen(queue) == 0 and last is not None and last != before

        wait_until(drained, "the worker drains its queue and records a scan pass", 300)
        seconds = time.monotonic() - began
        rss = peak_rss_kib(worker.pid)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
        client.close()
    emails = len(list((work / "emails").glob("*"))) if (work / "emails").exists() else 0
    return {
        "tasks_waiting": waiting + 1,
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(rss / 1024, 1),
        "email_files": emails,
    }


def served(result: dict) -> int:
    """The answers that count as served: any 2xx, or 304 where the endpoint is the conditional read."""
    if result["expected"] == "304":
        return result["statuses"].get("304", 0)
    return sum(n for status, n in result["statuses"].items() if status.startswith("2"))


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def report(measured: list[dict], web_rss: dict, celery: dict, args) -> None:
    baselines = sorted((result["baseline"] for result in measured if "baseline" in result), key=lambda b: b["rps"])
    median = baselines[len(baselines) // 2]
    rows, records = [], []
    for result in [median, *measured]:
        name = result["target"]
        target = TARGETS[name] if name else None
        if "skipped" in result:
            records.append({**result, "target_rps_ratio": target, "target_p99_ratio": P99_TARGET, "met": None})
            rows.append([result["label"], *["-"] * 3, f">= {target:.2f}", *["-"] * 4, f"< {P99_TARGET:.0f}x"])
            rows[-1].append(result["skipped"])
            continue
        base = result.get("baseline", median)
        rps_ratio = result["rps"] / base["rps"]
        p99_ratio = result["p99_ms"] / base["p99_ms"]
        unexpected = result["requests"] - served(result)
        rps_met, p99_met = rps_ratio >= (target or 0), p99_ratio < P99_TARGET
        met = None if target is None else (rps_met and p99_met and unexpected == 0)
        records.append(
            {
                **result,
                "rps_ratio": rps_ratio,
                "p99_ratio": p99_ratio,
                "target_rps_ratio": target,
                "target_p99_ratio": None if target is None else P99_TARGET,
                "met": met,
                "unexpected_statuses": unexpected,
            }
        )
        overall = "-" if met is None else verdict(met)
        if met is False and unexpected:
            overall += f" ({unexpected} answers not {result['expected']})"
        rows.append(
            [
                result["label"],
                f"{result['rps']:.0f}",
                f"{base['rps']:.0f}",
                f"{rps_ratio:.2f}",
                "-" if target is None else f">= {target:.2f}: {verdict(rps_met)}",
                f"{result['p50_ms']:.1f}",
                f"{result['p99_ms']:.1f}",
                f"{base['p99_ms']:.1f}",
                f"{p99_ratio:.1f}",
                "-" if target is None else f"< {P99_TARGET:.0f}x: {verdict(p99_met)}",
                overall,
            ]
        )
    print()
    headers = ["endpoint", "req/s", "baseline req/s", "x baseline", "req/s target", "p50 ms", "p99 ms"]
    print(markdown_table([*headers, "baseline p99 ms", "p99 x baseline", "p99 target", "targets"], rows))
    web_peak = max(web_rss.values()) / 1024 if web_rss else 0
    print()
    print(
        markdown_table(
            ["process", "peak RSS (MiB)", "after"],
            [
                [f"gunicorn sync worker (max of {len(web_rss)})", f"{web_peak:.1f}", "the whole load run"],
                [
                    "Celery worker (solo pool)",
                    f"{celery['peak_rss_mib']:.1f}",
                    f"{celery['tasks_waiting']} tasks (order emails + a scan pass) in {celery['seconds']} s",
                ],
            ],
        )
    )
    path = write_results(
        "load",
        {
            "settings": {
                "workers": args.workers,
                "worker_class": "sync",
                "connections": args.connections,
                "warmup_s": args.warmup,
                "duration_s": args.duration,
                "nodes": args.nodes,
                "open_orders": args.open_orders,
                "django_settings": "config.settings.production (+ bench)",
            },
            "targets": {"rps_ratio": TARGETS, "p99_ratio_below": P99_TARGET},
            "endpoints": records,
            "web_workers_peak_rss_kib": web_rss,
            "celery": celery,
        },
    )
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()

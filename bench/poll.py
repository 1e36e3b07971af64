"""Customers watching their open orders: what the order page's polling costs the server, the old script against
the new one, both measured in one run against the same server.

N customers each have the page of their own open order open for D seconds, and poll
`GET /api/v1/orders/<reference>/` (header X-Order-Token) as the page's script does:

* `before`, the old script: every 5 s, never with If-None-Match (each answer is a full 200); 15 s once
  nothing has changed for 5 minutes (60 s after 30), the failures' back-off doubling it at most twice.
* `after`, the new one (static/js/order-status.js): first poll 2 s after the page loads, then with the last
  ETag in If-None-Match: each unchanged answer (304, or a 200 showing the same status, payment and progress)
  multiplies the delay by 1.5, up to 20 s; a changed one sets it back to 2 s. The first answer is the page's
  own state: it counts as unchanged.

Both scripts also poll at once when the page gets the focus back: `--focus-every S` gives each customer such
an event every S seconds on average (exponentially distributed); none by default. The page loads are spread
evenly over the first `--spread` seconds (one period of the old script by default), the same in both modes,
so that the customers do not all fire at once; each then polls for D seconds of its own.

The server is bench/load.py's: gunicorn (sync workers) on the production settings (bench/settings.py), a
database of its own on the PostgreSQL of DATABASE_URL (or the local one, dropped at the end), a real anvil,
Redis, rate limits off. The N open orders are stored with tests/perf/bulk.py (ANALYZE after: production's
autovacuum keeps statistics, a fresh bulk load has none); each order's token is computed here, under the same
DJANGO_SECRET_KEY as the server's. While a mode runs, this process moves the confirmations of about 1 % of
the orders' payments every second (see Trickle): some answers change, as they do while payments confirm.

The load generator is this script again, in a process of its own (asyncio, raw HTTP/1.1 over loopback, a new
connection per request: the sync workers close each one). Per mode: requests served per second, statuses,
p50 and p99 latency, and the server's CPU seconds per customer-minute: the gunicorn workers' and the bench
database's PostgreSQL backends' utime + stime (from /proc; backends found in pg_stat_activity, sampled
often enough to count one that ends during the run), over N x D / 60. The load generator's own CPU apart.

    .venv/bin/python bench/poll.py [--customers 1000] [--duration 60] [--modes before after] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import random
import resource
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, write_results  # noqa: E402
from bench.load import (  # noqa: E402
    PROXY,
    _answers,
    bench_run,
    children_of,
    gunicorn_start,
    process_stop,
    seed,
    wait_until,
)
from tests.servers import free_port  # noqa: E402

MODES = ("before", "after")
PREFIX = "B2-BENCH-"  # bench.load.seed's open orders
# As a browser's fetch, which has no timeout of its own: a saturated server makes a customer wait for its answer
# (and poll later), it does not make it ask again while its first request still waits in the listen queue.
REQUEST_TIMEOUT_S = 60.0
TRICKLE_SHARE = 0.01  # of the orders, each second
SAMPLE_EVERY_S = 0.25  # CPU readings; the list of backends is read once a second
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the two scripts -----------------------------------------------------------------------------------


class OldScript:
    """The page's script before conditional polling: a fixed period, and every answer a full body."""

    conditional = False
    PERIOD_S, QUIET_AFTER_S, MAX_S = 5.0, 300.0, 60.0

    def __init__(self, loaded_at: float) -> None:
        self.last_change = loaded_at
        self.answer = None
        self.failures = 0
        self.etag = None
        self.changes = 0

    def first_delay(self) -> float:
        return self.PERIOD_S

    def answered(self, now: float, status: int, etag: str | None, answer: str | None) -> float:
        """The delay before the next poll, after an answer at `now` (status 0: no answer)."""
        if status == 200:
            self.failures = 0
            if answer != self.answer:  # as the script: its first answer too moves lastChange
                self.changes += self.answer is not None
                self.answer = answer
                self.last_change = now
        elif status != 304:
            self.failures += 1
        quiet = now - self.last_change
        base = self.PERIOD_S
        delay = base * 12 if quiet > 6 * self.QUIET_AFTER_S else base * 3 if quiet > self.QUIET_AFTER_S else base
        if self.failures:
            delay *= 2 ** min(self.failures, 2)  # a busy or restarting server: back off a little
        return min(delay, self.MAX_S)


class NewScript:
    """The page's script with conditional polling: If-None-Match, and a delay that grows while nothing moves."""

    conditional = True
    FIRST_S, GROWTH, MAX_S, FAILING_MAX_S = 2.0, 1.5, 20.0, 60.0

    def __init__(self, loaded_at: float) -> None:
        self.delay = self.FIRST_S
        self.etag = None
        self.answer = None
        self.failures = 0
        self.changes = 0

    def first_delay(self) -> float:
        return self.FIRST_S

    def answered(self, now: float, status: int, etag: str | None, answer: str | None) -> float:
        if status == 304:
            changed = False
        elif status == 200:
            # As the script: a full answer is compared on what it shows (a server without ETags sends only these).
            changed = self.answer is not None and answer != self.answer
            self.etag, self.answer = etag, answer
        else:
            self.failures += 1
            return min(self.delay * 2 ** min(self.failures, 2), self.FAILING_MAX_S)
        self.failures = 0
        self.changes += changed
        self.delay = self.FIRST_S if changed else min(self.delay * self.GROWTH, self.MAX_S)
        return self.delay


SCRIPTS = {"before": OldScript, "after": NewScript}


# --- the load generator (its own process) --------------------------------------------------------------


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def request_bytes(path: str, token: str, etag: str | None) -> bytes:
    lines = [
        f"GET {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{name}: {value}" for name, value in PROXY.items()),
        "Accept: application/json",
        "Accept-Encoding: identity",
        f"X-Order-Token: {token}",
        *([f"If-None-Match: {etag}"] if etag else []),
        "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request on a new connection: status, headers (lower-case names), body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        headers = {}
        for line in head[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if status in (204, 304) or status < 200:
            body = b""
        elif "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        else:
            body = await reader.read()
        return status, headers, body
    finally:
        writer.close()


def shown(body: bytes) -> str | None:
    """What the old script compared between answers: the order's status, its payment and its progress."""
    try:
        order = json.loads(body)
        return json.dumps([order.get("status"), order.get("payment"), order.get("preparation_progress")])
    except (ValueError, AttributeError):
        return hashlib.sha256(body).hexdigest()


class Tally:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.statuses: dict[str, int] = {}
        self.errors = 0
        self.if_none_match = 0
        self.last_answer = 0.0


async def customer(
    loop, port: int, path: str, token: str, script, *, loaded_at: float, args, rng: random.Random, tally: Tally
) -> None:
    end = loaded_at + args.duration
    due = loaded_at + script.first_delay()
    focus_next = loaded_at + rng.expovariate(1 / args.focus_every) if args.focus_every else math.inf
    while True:
        focused = focus_next < due
        when = focus_next if focused else due
        if when >= end:
            return
        await asyncio.sleep(max(0.0, when - loop.time()))
        etag = script.etag if script.conditional else None
        tally.if_none_match += etag is not None
        began = loop.time()
        try:
            status, headers, body = await asyncio.wait_for(
                exchange(port, request_bytes(path, token, etag)), REQUEST_TIMEOUT_S
            )
        except (OSError, TimeoutError, ValueError, IndexError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status, headers, body = 0, {}, b""
        ended = loop.time()
        tally.last_answer = max(tally.last_answer, ended)
        if status:
            tally.latencies.append(ended - began)
            tally.statuses[str(status)] = tally.statuses.get(str(status), 0) + 1
        else:
            tally.errors += 1
        if status == 404:
            return  # the link no longer opens the order: the script stops
        answer = shown(body) if status == 200 else None
        delay = script.answered(ended, status, headers.get("etag"), answer)
        if focused:
            focus_next = ended + rng.expovariate(1 / args.focus_every)
        due = ended + delay


async def generate(args) -> dict:
    orders = json.loads(Path(args.orders).read_text())
    loop = asyncio.get_running_loop()
    t0 = loop.time() + max(0.0, args.start_at - time.time())
    tally = Tally()
    scripts = []
    tasks = []
    rng = random.Random(args.seed)
    for i, (path, token) in enumerate(orders):
        loaded_at = t0 + i * args.spread / len(orders)
        script = SCRIPTS[args.generate](loaded_at)
        scripts.append(script)
        coroutine = customer(
            loop,
            args.port,
            path,
            token,
            script,
            loaded_at=loaded_at,
            args=args,
            rng=random.Random(rng.random()),
            tally=tally,
        )
        tasks.append(asyncio.ensure_future(coroutine))
    await asyncio.sleep(max(0.0, t0 - loop.time()))
    cpu_began = time.process_time()
    bound = args.spread + args.duration + REQUEST_TIMEOUT_S + 10
    done, late = await asyncio.wait(tasks, timeout=bound)
    for task in late:
        task.cancel()
    for task in done:
        task.result()  # a bug in a customer's loop stops the run
    cpu = time.process_time() - cpu_began
    latencies = sorted(tally.latencies)
    return {
        "mode": args.generate,
        "customers": len(orders),
        "requests": len(latencies),
        "statuses": tally.statuses,
        "errors": tally.errors,
        "unfinished_customers": len(late),
        "if_none_match_sent": tally.if_none_match,
        "changes_seen": sum(script.changes for script in scripts),
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "window_s": round(tally.last_answer - t0, 3) if latencies else 0.0,
        "loadgen_cpu_s": round(cpu, 3),
    }


def generator_main(args) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    result = asyncio.run(generate(args))
    Path(args.out).write_text(json.dumps(result))


# --- the server's CPU ----------------------------------------------------------------------------------


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process, in clock ticks; None once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


class CpuMeter:
    """The CPU the gunicorn workers and the bench database's backends use between start() and the last sample.

    A backend (or worker) first seen after start() counts from zero; one that ends keeps its last reading
    (Django reconnects every CONN_MAX_AGE seconds: a worker's backend may end during a mode)."""

    def __init__(self, *, gunicorn_pid: int, monitor, database: str, own_backend: int) -> None:
        self.gunicorn_pid = gunicorn_pid
        self.monitor = monitor
        self.database = database
        self.own_backend = own_backend
        self.first: dict[tuple[str, int], int] = {}
        self.last: dict[tuple[str, int], int] = {}

    def _current(self) -> list[tuple[str, int]]:
        rows = self.monitor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend' AND pid <> %s",
            [self.database, self.own_backend],
        ).fetchall()
        return [("workers", pid) for pid in children_of(self.gunicorn_pid)] + [("backends", pid) for (pid,) in rows]

    def start(self) -> None:
        self.first.clear()
        self.last.clear()
        for key in self._current():
            ticks = cpu_ticks(key[1])
            if ticks is not None:
                self.first[key] = self.last[key] = ticks

    def refresh(self) -> None:
        for key in self._current():
            if key not in self.last:
                self.first[key] = 0
                self.last[key] = cpu_ticks(key[1]) or 0

    def sample(self) -> None:
        for key, previous in self.last.items():
            ticks = cpu_ticks(key[1])
            if ticks is not None and ticks >= previous:  # (a pid reused by another process reads lower)
                self.last[key] = ticks

    def seconds(self) -> dict:
        used = {"workers": 0, "backends": 0}
        seen = {"workers": 0, "backends": 0}
        for (group, _pid), ticks in self.last.items():
            used[group] += ticks - self.first[(group, _pid)]
            seen[group] += 1
        return {
            "workers_cpu_s": used["workers"] / CLOCK_TICKS,
            "backends_cpu_s": used["backends"] / CLOCK_TICKS,
            "workers_seen": seen["workers"],
            "backends_seen": seen["backends"],
        }


class Trickle:
    """Stands for the scan pass: every second it moves the confirmations of about 1 % of the open orders'
    payments (their status stays), in one queryset update, as a pass that sees their transfers gain blocks."""

    def __init__(self, payment_ids: list[int], *, seed: int) -> None:
        self.ids = payment_ids
        self.per_pass = max(1, round(len(payment_ids) * TRICKLE_SHARE))
        self.rng = random.Random(seed)
        self.passes = 0
        self.rows = 0

    def step(self) -> None:
        from django.db.models import F

        from payments.models import PaymentRequest

        chosen = self.rng.sample(self.ids, min(self.per_pass, len(self.ids)))
        self.rows += PaymentRequest.objects.filter(pk__in=chosen).update(confirmations=F("confirmations") + 1)
        self.passes += 1


# --- one run -------------------------------------------------------------------------------------------


def first_answer(port: int, path: str, token: str) -> tuple[int, str | None]:
    """A plain GET of the order, as the page's first poll: its status and ETag (None when none is served)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={**PROXY, "Accept": "application/json", "X-Order-Token": token}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status, response.headers.get("ETag")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("ETag")


def run_mode(mode: str, *, args, port: int, work: Path, meter: CpuMeter, trickle: Trickle) -> dict:
    out = work / f"poll-{mode}.json"
    start_at = time.time() + 2.0  # the generator's imports and set-up come before
    passes, rows = trickle.passes, trickle.rows
    command = [sys.executable, str(Path(__file__).resolve()), "--generate", mode, "--port", str(port)]
    command += ["--orders", str(work / "orders.json"), "--out", str(out), "--start-at", repr(start_at)]
    command += ["--duration", str(args.duration), "--spread", str(args.spread), "--seed", str(args.seed)]
    command += ["--focus-every", str(args.focus_every)]
    log = (work / f"poll-{mode}.log").open("wb")
    generator = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(max(0.0, start_at - time.time()))
        meter.start()
        load_began = os.getloadavg()[0]  # the machine may be shared: how busy it was around the mode
        began = time.monotonic()
        deadline = began + args.spread + args.duration + REQUEST_TIMEOUT_S + 40
        next_pass = began
        while generator.poll() is None:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"the {mode} load generator runs past {deadline - began:.0f} s")
            if now >= next_pass:
                trickle.step()
                meter.refresh()
                next_pass += 1.0
            meter.sample()
            time.sleep(SAMPLE_EVERY_S)
        meter.sample()
        elapsed = time.monotonic() - began
    finally:
        if generator.poll() is None:
            generator.kill()
            generator.wait()
        log.close()
    if generator.returncode != 0 or not out.exists():
        sys.exit(f"bench: the {mode} load generator failed:\n" + (work / f"poll-{mode}.log").read_text()[-3000:])
    result = json.loads(out.read_text())
    cpu = meter.seconds()
    server_cpu = cpu["workers_cpu_s"] + cpu["backends_cpu_s"]
    customer_minutes = result["customers"] * args.duration / 60
    window = args.spread + args.duration
    result.update(
        cpu,
        polling_s_each=args.duration,
        window_s_nominal=window,
        measured_s=round(elapsed, 3),
        load_average_1m=[load_began, os.getloadavg()[0]],
        rps=result["requests"] / window,
        requests_per_customer_minute=result["requests"] / customer_minutes,
        server_cpu_s=server_cpu,
        server_cpu_s_per_customer_minute=server_cpu / customer_minutes,
        server_cpu_ms_per_request=server_cpu / max(result["requests"], 1) * 1000,
        loadgen_cpu_s_per_customer_minute=result["loadgen_cpu_s"] / customer_minutes,
        trickle_passes=trickle.passes - passes,
        trickle_rows_updated=trickle.rows - rows,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--customers", type=int, default=1000, help="customers, each on its own open order")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds each customer polls")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers")
    parser.add_argument("--spread", type=float, default=OldScript.PERIOD_S, help="page loads over these seconds")
    parser.add_argument("--focus-every", type=float, default=0.0, help="mean seconds between focus events (0: none)")
    parser.add_argument("--seed", type=int, default=1)
    # The load generator: this script again, in its own process (run_mode starts it).
    parser.add_argument("--generate", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--orders", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        generator_main(args)
        return
    if args.customers < 1 or args.duration <= 0:
        parser.error("--customers and --duration must be positive")

    import psycopg

    gunicorn = None
    measured: dict[str, dict] = {}
    with bench_run("poll") as run:
        try:
            from django.db import connection

            from orders.models import Order
            from orders.order_links import order_access_token
            from payments.models import PaymentRequest

            seed(nodes=0, open_orders=args.customers)
            orders = list(Order.objects.filter(reference__startswith=PREFIX).order_by("pk"))
            assert len(orders) == args.customers, len(orders)
            polled = [(f"/api/v1/orders/{order.reference}/", order_access_token(order)) for order in orders]
            (run.work / "orders.json").write_text(json.dumps(polled))
            payments = PaymentRequest.objects.filter(order__reference__startswith=PREFIX, extension=None)
            payment_ids = list(payments.values_list("pk", flat=True))
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                own_backend = cursor.fetchone()[0]

            port = free_port()
            gunicorn = gunicorn_start(run, port, args.workers)
            wait_until(lambda: _answers(port), "gunicorn answers /bench/baseline/", 60)
            # A first read of a few orders: both workers' imports and connections are warm, and whether the
            # server serves an ETag yet.
            firsts = [first_answer(port, path, token) for path, token in polled[:20]]
            assert all(status == 200 for status, _etag in firsts), firsts
            etag_served = all(etag for _status, etag in firsts)
            print(f"  {args.customers} open orders; the order API serves an ETag: {etag_served}", flush=True)

            trickle = Trickle(payment_ids, seed=args.seed)
            with psycopg.connect(run.admin_url, autocommit=True) as monitor:
                meter = CpuMeter(
                    gunicorn_pid=gunicorn.pid, monitor=monitor, database=run.database, own_backend=own_backend
                )
                for mode in args.modes:
                    measured[mode] = run_mode(mode, args=args, port=port, work=run.work, meter=meter, trickle=trickle)
                    result = measured[mode]
                    print(
                        f"  {mode}: {result['requests']} requests, statuses {result['statuses']}, "
                        f"errors {result['errors']}, server CPU {result['server_cpu_s']:.1f} s",
                        flush=True,
                    )
                    time.sleep(1.0)
            connection.close()
        finally:
            process_stop(gunicorn)

    report(measured, etag_served, args)


def report(measured: dict[str, dict], etag_served: bool, args) -> None:
    rows = []
    for mode, result in measured.items():
        statuses = result["statuses"]
        other = result["requests"] - statuses.get("200", 0) - statuses.get("304", 0) + result["errors"]
        rows.append(
            [
                mode,
                result["customers"],
                f"{result['requests']}",
                f"{result['rps']:.1f}",
                statuses.get("200", 0),
                statuses.get("304", 0),
                other,
                f"{result['p50_ms']:.1f}",
                f"{result['p99_ms']:.1f}",
                f"{result['workers_cpu_s']:.1f} + {result['backends_cpu_s']:.1f}",
                f"{result['server_cpu_s_per_customer_minute']:.4f}",
                f"{result['loadgen_cpu_s']:.1f}",
            ]
        )
    print()
    headers = ["mode", "customers", "requests", "req/s", "200", "304", "other", "p50 ms", "p99 ms"]
    headers += ["server CPU s (gunicorn + PostgreSQL)", "server CPU s per customer-minute", "load generator CPU s"]
    print(markdown_table(headers, rows))
    if {"before", "after"} <= measured.keys():
        before, after = measured["before"], measured["after"]
        print(
            f"\nafter / before: {after['requests'] / max(before['requests'], 1):.2f} x the requests, "
            f"{after['server_cpu_s_per_customer_minute'] / max(before['server_cpu_s_per_customer_minute'], 1e-9):.2f}"
            " x the server CPU per customer-minute"
        )
    path = write_results(
        "poll",
        {
            "settings": {
                "customers": args.customers,
                "polling_s_each": args.duration,
                "page_loads_spread_s": args.spread,
                "focus_every_s": args.focus_every or None,
                "trickle": f"confirmations of {TRICKLE_SHARE:.0%} of the payments moved each second",
                "workers": args.workers,
                "worker_class": "sync",
                "django_settings": "config.settings.production (+ bench)",
            },
            "etag_served": etag_served,
            "modes": measured,
        },
    )
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()

"""PostgreSQL restarted under traffic: requests fail cleanly while it is down, nothing is half-stored, and the
same web process serves again within seconds once it is back (no restart of Django)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import psycopg
import pytest

from tests.faults.servers import Gunicorn, wait_until
from tests.servers import ROOT, clean_environment, deployed_secrets

NODES = 60
RECOVERY_SECONDS = 5
ORDER = {
    "lots": 1,
    "duration_days": 7,
    "preparation": "pytorch-blackwell",
    "first_name": "Ada",
    "last_name": "Lovelace",
    "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ada@lab",
    "network": "local",
    "asset": "ETH",
}
CREATE_NODES = f"""
from provisioning.models import Node
Node.objects.bulk_create([Node(name=f"node-{{n}}", driver="local", host="127.0.0.1") for n in range({NODES})])
"""


@dataclass
class Answer:
    kind: str
    at: float
    status: int  # 0: no HTTP answer at all
    body: str
    seconds: float
    retry_after: str | None = None
    request_id: str | None = None  # its X-Request-ID header


def request(base: str, kind: str, number: int) -> Answer:
    if kind == "order":
        body = json.dumps({**ORDER, "email": f"ada+{number}@example.org"}).encode()
        sent = urllib.request.Request(base + "/api/v1/orders/", body, {"Content-Type": "application/json"})
    else:
        sent = urllib.request.Request(base + ("/" if kind == "home" else "/api/v1/catalog/"))
    started = time.monotonic()
    retry_after = request_id = None
    try:
        with urllib.request.urlopen(sent, timeout=15) as response:
            status, text = response.status, response.read().decode(errors="replace")
            request_id = response.headers["X-Request-ID"]
    except urllib.error.HTTPError as error:
        status, text, retry_after = error.code, error.read().decode(errors="replace"), error.headers["Retry-After"]
        request_id = error.headers["X-Request-ID"]
    except OSError as error:
        status, text = 0, repr(error)
    return Answer(kind, started, status, text, time.monotonic() - started, retry_after, request_id)


class Traffic(threading.Thread):
    """Home page, catalog, new order, again and again, each request bounded, until stopped."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base = base
        self.answers: list[Answer] = []
        self.done = threading.Event()

    def run(self) -> None:
        number = 0
        while not self.done.is_set():
            for kind in ("home", "catalog", "order"):
                number += 1
                self.answers.append(request(self.base, kind, number))

    def ok(self, answer: Answer) -> bool:
        return answer.status == (201 if answer.kind == "order" else 200)

    def last(self) -> list[tuple[str, int, str]]:
        return [(a.kind, a.status, a.body[:300]) for a in self.answers[-3:]]

    def count(self, predicate) -> int:
        return sum(1 for answer in list(self.answers) if predicate(answer))


def stored_orders(url: str) -> tuple[set[str], list[str]]:
    """Every order reference in the database, and those missing their payment request or reservation."""
    with psycopg.connect(url.replace("postgres://", "postgresql://"), connect_timeout=5) as connection:
        references = {row[0] for row in connection.execute("SELECT reference FROM shop_order")}
        halves = connection.execute(
            "SELECT o.reference FROM shop_order o"
            " WHERE NOT EXISTS (SELECT 1 FROM payments_paymentrequest p WHERE p.order_id = o.id)"
            " OR NOT EXISTS (SELECT 1 FROM shop_reservation r WHERE r.order_id = o.id)"
        ).fetchall()
    return references, [row[0] for row in halves]


@pytest.fixture
def shop_on_private_postgres(private_postgres, anvil, tmp_path):
    """gunicorn (DEBUG off) on a migrated private cluster with 60 nodes and the `local` chain; tasks go to an
    in-memory broker."""
    env = clean_environment(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=private_postgres.url,
        DJANGO_DEBUG="0",
        **deployed_secrets(),  # refused otherwise with DEBUG off
        CELERY_BROKER_URL="memory://",
        RATELIMIT_ENABLE="0",
        CHAIN_RPC_URLS_LOCAL=anvil.url,
    )
    for command in (["migrate", "-v", "0"], ["shell", "-c", CREATE_NODES]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-3000:]
    server = Gunicorn(
        tmp_path,
        **{
            key: env[key]
            for key in ("DATABASE_URL", "DJANGO_DEBUG", "CELERY_BROKER_URL", "RATELIMIT_ENABLE", "CHAIN_RPC_URLS_LOCAL")
        },
        **deployed_secrets(),
    )
    try:
        yield server
    finally:
        server.stop()


def test_a_postgres_restart_under_traffic_fails_requests_cleanly_and_the_same_process_recovers_in_seconds(
    private_postgres, shop_on_private_postgres
):
    shop = shop_on_private_postgres
    traffic = Traffic(shop.url)
    traffic.start()
    try:
        # Given customers browsing and ordering, every request answered
        wait_until(
            lambda: traffic.count(lambda a: a.kind == "order" and traffic.ok(a)) >= 5,
            "5 orders",
            30,
            shop.log,
            traffic.last,
        )

        # When PostgreSQL stops (fast shutdown: open transactions roll back) and stays down a moment
        stopping_at = time.monotonic()
        private_postgres.stop()
        stopped_at = time.monotonic()
        wait_until(lambda: traffic.count(lambda a: a.at > stopped_at + 0.2 and a.status >= 500) >= 6, "errors", 20)
        # ... then comes back
        restarting_at = time.monotonic()
        private_postgres.start()
        restarted_at = time.monotonic()
        recovered = {
            kind: wait_until(
                lambda kind=kind: next(
                    (
                        a.at + a.seconds
                        for a in list(traffic.answers)
                        if a.kind == kind and a.at > restarted_at and traffic.ok(a)
                    ),
                    None,
                ),
                f"a good answer to {kind} after the restart",
                RECOVERY_SECONDS * 3,
                shop.log,
            )
            for kind in ("home", "catalog", "order")
        }
        settled_at = max(recovered.values())
        wait_until(lambda: traffic.count(lambda a: a.kind == "order" and a.at > settled_at) >= 5, "5 more orders", 30)
    finally:
        traffic.done.set()
        traffic.join(timeout=20)

    answers = traffic.answers
    before = [a for a in answers if a.at + a.seconds < stopping_at]
    down = [a for a in answers if stopped_at <= a.at and a.at + a.seconds < restarting_at]
    after = [a for a in answers if a.at > settled_at]
    failed = [a for a in answers if not traffic.ok(a)]
    print(
        f"\nrequests: {len(answers)}; before: {len(before)}, while down: {len(down)} "
        f"({sum(1 for a in down if not traffic.ok(a))} failed), after recovery: {len(after)}; "
        f"statuses of failures: {sorted({a.status for a in failed})}; "
        f"slowest failure: {max((a.seconds for a in failed), default=0):.3f} s; "
        f"recovered {settled_at - restarted_at:.2f} s after the restart (home/catalog/order: "
        + ", ".join(f"{recovered[k] - restarted_at:.2f}" for k in ("home", "catalog", "order"))
        + " s)"
    )
    # Then every request before the stop and after the recovery succeeded
    assert all(traffic.ok(a) for a in before), [(a.kind, a.status) for a in before if not traffic.ok(a)]
    assert all(traffic.ok(a) for a in after), [(a.kind, a.status, a.body[:200]) for a in after if not traffic.ok(a)]
    # And while the database was down, each failure was a quick 503 (try again later) with a short message:
    # JSON in the API, a page on the site; no traceback, no SQL
    # (the home page and the catalog may still answer from the cached catalog, shop/catalog.py, for seconds)
    assert down and all(not traffic.ok(a) for a in down if a.kind == "order")
    for answer in failed:
        assert (answer.status, answer.retry_after) == (503, "10"), (answer.kind, answer.status, answer.body[:300])
        if answer.kind == "home":
            assert "The service is briefly unavailable." in answer.body
        else:
            body = json.loads(answer.body)
            assert body.pop("request_id") == answer.request_id and answer.request_id, answer.body
            assert body == {
                "detail": "The service is briefly unavailable. Please try again in a minute.",
                "code": "unavailable",
            }
        assert answer.seconds < 6
        assert len(answer.body) < 2000, answer.body[:2000]
        assert not re.search(r"Traceback|psycopg|OperationalError|connection failed|File \"", answer.body), answer.body
    # And the same web process served throughout: gunicorn booted one worker, once
    assert shop.process.poll() is None
    assert shop.output().count("Booting worker") == 1, shop.output()[-3000:]
    assert settled_at - restarted_at < RECOVERY_SECONDS
    # And every order a customer was given is stored whole; no order was stored that a customer was not given
    given = {json.loads(a.body)["reference"] for a in answers if a.kind == "order" and a.status == 201}
    stored, half_stored = stored_orders(private_postgres.url)
    assert half_stored == []
    assert stored == given, (sorted(stored - given), sorted(given - stored))

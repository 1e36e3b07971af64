"""Where each page's time goes: cProfile over N warm requests per endpoint, in one process, with the production
settings (as bench/load.py serves them) on a database of its own, a real anvil, and the local Redis.

    .venv/bin/python bench/profile_pages.py [--requests 200] [--top 25] [--only home]
    (PROFILE_SORT=tottime: functions by their own time instead of the cumulative)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.databases import database_create, database_drop, postgres_url_required  # noqa: E402
from bench.load import PROXY, order_body, production_env, redis_url, seed  # noqa: E402
from tests.servers import Anvil  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200, help="profiled requests per endpoint")
    parser.add_argument("--top", type=int, default=25, help="functions listed per endpoint (by cumulative time)")
    parser.add_argument("--only", default="", help="profile only endpoints whose label contains this")
    args = parser.parse_args()

    admin_url = postgres_url_required("profile")
    broker = redis_url()
    name = f"bench_profile_{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    database_url = database_create(admin_url, name)
    anvil = Anvil()
    env = {
        **production_env(
            database_url=database_url, broker=broker, anvil=anvil, work=work, queue=f"bench-profile-{os.getpid()}"
        ),
        "DJANGO_ALLOWED_HOSTS": "testserver",
        "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
    }
    os.environ.update(env)
    try:
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=os.environ, check=True, cwd=ROOT)
        subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], env=os.environ, check=True, cwd=ROOT)
        import django

        django.setup()
        seed(nodes=args.requests * 2 + 10, open_orders=1000)
        profile_endpoints(args)
    finally:
        anvil.stop()
        from django.db import connections

        connections.close_all()
        database_drop(admin_url, name)
        shutil.rmtree(work, ignore_errors=True)
        import redis

        redis.Redis.from_url(broker).delete(env["BENCH_QUEUE"])


def profile_endpoints(args) -> None:
    import json

    from django.core.cache import cache
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    headers = {"X-Forwarded-Proto": PROXY["X-Forwarded-Proto"]}
    client = Client(headers=headers, enforce_csrf_checks=True)
    body = order_body()
    placed = [json.loads(client.post("/api/v1/orders/", body, content_type="application/json").content) for _ in "ab"]
    paid = placed[0]

    visitor = Client(headers=headers)

    def fresh() -> Client:  # the load generator keeps no cookies: every request is a new visitor
        visitor.cookies.clear()
        return visitor

    def changed() -> Client:  # as if the order had changed since the last read: nothing kept (locmem: cheap)
        cache.clear()
        return fresh()

    order_url, token = f"/api/v1/orders/{paid['reference']}/", {"X-Order-Token": paid["access_token"]}
    etag = fresh().get(order_url, headers=token).headers["ETag"]
    page = urlsplit(paid["status_url"]).path
    endpoints = [
        ("baseline", lambda: fresh().get("/bench/baseline/")),
        ("home", lambda: fresh().get("/")),
        ("catalog page", lambda: fresh().get("/order/")),
        ("payment page (kept)", lambda: fresh().get(page)),
        ("payment page (changed order: read and rendered)", lambda: changed().get(page)),
        ("api catalog", lambda: fresh().get("/api/v1/catalog/")),
        ("api order 304 (If-None-Match)", lambda: fresh().get(order_url, headers={**token, "If-None-Match": etag})),
        ("api order (kept body)", lambda: fresh().get(order_url, headers=token)),
        ("api order (changed order: read and serialised)", lambda: changed().get(order_url, headers=token)),
        ("api place order", lambda: fresh().post("/api/v1/orders/", body, content_type="application/json")),
    ]
    for label, call in endpoints:
        if args.only and args.only not in label:
            continue
        for _ in range(5):
            status = call().status_code
            assert status in (200, 201, 304), (label, status)
        with CaptureQueriesContext(connection) as captured:
            call()
        queries = len(captured.captured_queries)
        reset_queries()
        began = time.perf_counter()
        for _ in range(args.requests):
            call()
        plain_ms = (time.perf_counter() - began) / args.requests * 1000
        profiler = cProfile.Profile()
        began = time.perf_counter()
        profiler.enable()
        for _ in range(args.requests):
            call()
        profiler.disable()
        per_request_ms = (time.perf_counter() - began) / args.requests * 1000
        out = io.StringIO()
        order = os.environ.get("PROFILE_SORT", "cumulative")
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(args.top)
        print(f"\n===== {label}: {plain_ms:.2f} ms/request ({per_request_ms:.2f} profiled), {queries} queries =====")
        print(out.getvalue())


if __name__ == "__main__":
    main()

"""A real Celery worker, fed through Redis, checks "I have paid" against the chain and settles the payment."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from payments.models import Credit, Notice, PaymentEvent
from payments.tasks import notice_verify_task
from tests.servers import ROOT, server_missing
from tests.verification.helpers import ORDERS_URL, order_of, payment_of, units

WAIT_SECONDS = 30
worker_test = pytest.mark.django_db(transaction=True, serialized_rollback=True)

# The worker's own default queue is the test's queue too: tasks it enqueues itself (the scan that follows a
# notice) come back to it, never to a shared queue that another worker might consume.
WORKER = """
import sys
from config.celery import app
app.conf.task_default_queue = sys.argv[1]
app.worker_main(["worker", "--pool", "solo", "--concurrency", "1", "-Q", sys.argv[1], "--hostname",
                 sys.argv[1] + "@%h", "--without-gossip", "--without-mingle", "--loglevel", "INFO"])
"""


class Worker:
    def __init__(self, process: subprocess.Popen, log: Path, emails: Path) -> None:
        self.process = process
        self.log = log
        self.emails = emails

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for(self, condition, what: str):
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            result = condition()
            if result:
                return result
            assert self.process.poll() is None, f"the worker exited:\n{self.output()}"
            time.sleep(0.1)
        pytest.fail(f"{what} within {WAIT_SECONDS} s; worker output:\n{self.output()[-6000:]}")


def clean_environment(**overrides: str) -> dict[str, str]:
    """The current environment without the project's settings variables, plus `overrides`."""
    prefixes = ("DJANGO_", "PAYMENTS_", "EMAIL_", "CHAIN_RPC_URLS_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env.update(overrides)
    return env


@pytest.fixture
def redis_url(settings) -> str:
    """The configured Redis broker, answering a PING; fails under CI=true when it is missing."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        server_missing("Redis (set CELERY_BROKER_URL=redis://...)")
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        server_missing(f"Redis at {url} ({type(exc).__name__})")
    finally:
        client.close()
    return url


def worker_database_url() -> str:
    from urllib.parse import quote

    from django.db import connection

    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}{port}/{quote(db['NAME'], safe='')}"


@pytest.fixture
def payments_worker(require_postgres, redis_url, chain, tmp_path):
    """`celery -A config worker` on a queue of its own, on the test database, watching this test's chain.

    Eager mode is off in this process while it runs: tasks travel through Redis to the worker.
    """
    from config.celery import app

    queue = f"test-verify-{uuid.uuid4().hex[:12]}"
    emails = tmp_path / "emails"
    emails.mkdir()
    log = tmp_path / "worker.log"
    env = clean_environment(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=worker_database_url(),
        CELERY_BROKER_URL=redis_url,
        CHAIN_RPC_URLS_LOCAL=chain.node.url,
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
        EMAIL_FILE_PATH=str(emails),
        PYTHONUNBUFFERED="1",
    )
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-c", WORKER, queue], cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    previous_eager, previous_routes = app.conf.task_always_eager, app.conf.task_routes
    app.conf.task_always_eager = False
    app.conf.update(task_routes={"shop.tasks.*": {"queue": queue}, "payments.tasks.*": {"queue": queue}})
    try:
        yield Worker(process, log, emails)
    finally:
        app.conf.task_always_eager = previous_eager
        app.conf.update(task_routes=previous_routes)
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        import redis

        client = redis.Redis.from_url(redis_url)
        client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        client.close()


def place_usdc_order(client, make_node, order_payload) -> dict:
    make_node()
    body = {**order_payload, "network": "local", "asset": "USDC"}
    response = client.post(ORDERS_URL, body, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def press_i_have_paid(client, placed: dict, tx_hash: str):
    return client.post(
        f"{ORDERS_URL}{placed['reference']}/paid/",
        {"tx_hash": tx_hash},
        content_type="application/json",
        headers={"X-Order-Token": placed["access_token"]},
    )


@worker_test
def test_i_have_paid_is_checked_by_a_worker_through_redis_and_the_order_is_paid(
    require_postgres, redis_url, chain, payments_worker, client, make_node, order_payload
):
    # Given a USDC order, paid from the customer's wallet, with 2 confirmations on the chain
    placed = place_usdc_order(client, make_node, order_payload)
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)

    # When the customer presses "I have paid" with the hash
    response = press_i_have_paid(client, placed, sent.tx_hash)

    # Then the API answers at once, and the worker credits the transfer and settles: the order is paid
    assert response.status_code == 202, response.content
    payments_worker.wait_for(lambda: order_of(placed).status == "paid", "the order was not paid")
    assert payment_of(placed).status == "confirmed"
    credit = Credit.objects.get(payment=payment_of(placed))
    assert (credit.tx_hash, credit.final) == (sent.tx_hash.lower(), True)
    assert Notice.objects.get(payment=payment_of(placed)).checked_at is not None
    assert "payments.tasks.notice_verify_task" in payments_worker.output()
    # And the worker emailed the customer that the payment is confirmed
    payments_worker.wait_for(
        lambda: any("payment confirmed" in f.read_text() for f in payments_worker.emails.glob("*.log")),
        "no 'payment confirmed' email was written",
    )


@worker_test
def test_the_same_notice_checked_twice_by_the_worker_credits_the_transfer_once(
    require_postgres, redis_url, chain, payments_worker, client, make_node, order_payload
):
    # Given a USDC order paid in full, which "I have paid" with the hash has already settled through the worker
    placed = place_usdc_order(client, make_node, order_payload)
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    press_i_have_paid(client, placed, sent.tx_hash)
    payments_worker.wait_for(lambda: order_of(placed).status == "paid", "the order was not paid")
    notice = Notice.objects.get(payment=payment_of(placed))
    events = PaymentEvent.objects.filter(payment=payment_of(placed)).count()

    # When the same verification is enqueued twice more
    first, second = notice_verify_task.delay(notice.pk), notice_verify_task.delay(notice.pk)

    # Then the worker runs both, and the transfer is still credited once, the payment unchanged
    for result in (first, second):
        payments_worker.wait_for(
            lambda result=result: f"notice_verify_task[{result.id}] succeeded" in payments_worker.output(),
            f"the verification {result.id} did not run",
        )
    assert Credit.objects.filter(tx_hash=sent.tx_hash.lower()).count() == 1
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    assert payment_of(placed).received_base_units == units(placed)
    assert PaymentEvent.objects.filter(payment=payment_of(placed)).count() == events

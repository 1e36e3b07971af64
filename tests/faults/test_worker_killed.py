"""A Celery worker killed (SIGKILL) in the middle of a verification: Redis gives the unacknowledged task back
after the visibility timeout, a second worker runs it, and the transfer is credited once."""

from __future__ import annotations

import re
import time
import uuid

import pytest

from core.jobs.kinds import JobKind
from payments.models import Credit
from tests.faults.servers import wait_until
from tests.payments.verification.helpers import ORDERS_URL, order_of, payment_of, units
from tests.payments.verification.rpc_proxy import RpcProxy
from tests.placing import order_posted
from tests.servers import CeleryWorker, queue_delete, redis_answering, tasks_sent_to

VISIBILITY_SECONDS = 2
worker_test = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def slow_rpc(chain):
    """The chain behind a proxy that can keep a receipt request waiting: the worker's slow point."""
    proxy = RpcProxy(chain.node.url)
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def workers(settings, tmp_path):
    """Start workers on one queue of this test's own (tasks of this process go there); all stopped after."""
    broker = redis_answering(settings.CELERY_BROKER_URL)
    queue = f"test-killed-{uuid.uuid4().hex[:12]}"
    started: list[CeleryWorker] = []

    def start(name: str, **env: str) -> CeleryWorker:
        started.append(CeleryWorker(broker_url=broker, queue=queue, folder=tmp_path, name=name, **env))
        return started[-1]

    try:
        with tasks_sent_to(queue):
            yield start
    finally:
        for worker in started:
            worker.stop()
        queue_delete(broker, queue)


def confirmed_emails(worker: CeleryWorker) -> list[str]:
    return [subject for subject in worker.email_subjects() if "payment confirmed" in subject]


@worker_test
def test_a_worker_killed_while_it_verifies_a_payment_is_replaced_and_the_transfer_is_credited_once(
    chain, slow_rpc, workers, client, make_node, order_payload
):
    # Given a USDC order paid in full from the customer's wallet, with 2 confirmations
    make_node()
    placed = order_posted(client, {**order_payload, "asset": "USDC"})
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    env = {"CHAIN_RPC_URLS_LOCAL": slow_rpc.url, "CELERY_VISIBILITY_TIMEOUT_SECONDS": str(VISIBILITY_SECONDS)}
    first = workers("first-worker", **env)

    # When the customer presses "I have paid", and the worker is killed while it waits for the receipt
    slow_rpc.hold.set()
    response = client.post(
        f"{ORDERS_URL}{placed['reference']}/paid/",
        {"tx_hash": sent.tx_hash},
        content_type="application/json",
        headers={"X-Order-Token": placed["access_token"]},
    )
    assert response.status_code == 202, response.content
    assert slow_rpc.receipt_requested.wait(30), f"the worker never asked for the receipt:\n{first.output()[-4000:]}"
    asked_at = time.monotonic()
    first.process.kill()
    first.process.wait(timeout=10)
    slow_rpc.hold.clear()
    slow_rpc.release.set()
    (task_id,) = set(re.findall(r"payments\.notice_verify\[([0-9a-f-]+)\] received", first.output()))
    assert f"{task_id}] succeeded" not in first.output()
    assert not Credit.objects.filter(tx_hash=sent.tx_hash.lower()).exists()
    assert order_of(placed).status == "payment_reported"

    # Then, once the visibility timeout has passed since the delivery, a new worker gets the same task back
    wait_until(lambda: time.monotonic() > asked_at + VISIBILITY_SECONDS + 0.2, "the visibility timeout", 10)
    second = workers("second-worker", **env)
    second.wait_for(lambda: f"{JobKind.NOTICE_VERIFY}[{task_id}] succeeded" in second.output(), "no redelivery")
    # And it credits the transfer once, moves the order to paid once and sends one "payment confirmed" email
    second.wait_for(lambda: order_of(placed).status == "paid", "the order was not paid")
    second.wait_for(lambda: confirmed_emails(second), "no 'payment confirmed' email")
    second.wait_for(lambda: "scan_network_task" in second.output() and "succeeded" in second.output(), "no scan")
    assert Credit.objects.filter(tx_hash=sent.tx_hash.lower()).count() == 1
    assert payment_of(placed).status == "confirmed"
    assert [e.to_status for e in order_of(placed).events.all()].count("paid") == 1
    assert len(confirmed_emails(second)) == 1
    print(
        f"\nkilled mid-receipt; task {task_id} redelivered and done by the second worker "
        f"{time.monotonic() - asked_at:.1f} s after the kill (visibility timeout {VISIBILITY_SECONDS} s)"
    )

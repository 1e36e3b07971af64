"""A real Celery worker, fed through Redis, checks "I have paid" against the chain and settles the payment."""

from __future__ import annotations

import pytest

from core.jobs.kinds import JobKind
from payments.models import Credit, Notice, PaymentEvent
from payments.tasks import notice_verify_task
from tests.payments.verification.helpers import ORDERS_URL, order_of, payment_of, units
from tests.placing import order_posted
from tests.servers import celery_worker_on, redis_answering

worker_test = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def redis_url(settings) -> str:
    """The configured Redis broker, answering a PING; fails under CI=true when it is missing."""
    return redis_answering(settings.CELERY_BROKER_URL)


@pytest.fixture
def payments_worker(transactional_db, redis_url, chain, tmp_path):
    """`celery -A config worker` on a queue of its own, on the test database, watching this test's chain.

    Eager mode is off in this process while it runs: tasks travel through Redis to the worker.
    """
    with celery_worker_on(redis_url, tmp_path, CHAIN_RPC_URLS_LOCAL=chain.node.url) as worker:
        yield worker


def place_usdc_order(client, make_node, order_payload) -> dict:
    make_node()
    body = {**order_payload, "network": "local", "asset": "USDC"}
    return order_posted(client, body)


def press_i_have_paid(client, placed: dict, tx_hash: str):
    return client.post(
        f"{ORDERS_URL}{placed['reference']}/paid/",
        {"tx_hash": tx_hash},
        content_type="application/json",
        headers={"X-Order-Token": placed["access_token"]},
    )


@worker_test
def test_i_have_paid_is_checked_by_a_worker_through_redis_and_the_order_is_paid(
    redis_url, chain, payments_worker, client, make_node, order_payload
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
    assert JobKind.NOTICE_VERIFY in payments_worker.output()
    # And the worker emailed the customer that the payment is confirmed
    payments_worker.wait_for(
        lambda: any("payment confirmed" in subject for subject in payments_worker.email_subjects()),
        "no 'payment confirmed' email was written",
    )


@worker_test
def test_the_same_notice_checked_twice_by_the_worker_credits_the_transfer_once(
    redis_url, chain, payments_worker, client, make_node, order_payload
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
            lambda result=result: f"{notice_verify_task.name}[{result.id}] succeeded" in payments_worker.output(),
            f"the verification {result.id} did not run",
        )
    assert Credit.objects.filter(tx_hash=sent.tx_hash.lower()).count() == 1
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    assert payment_of(placed).received_base_units == units(placed)
    assert PaymentEvent.objects.filter(payment=payment_of(placed)).count() == events

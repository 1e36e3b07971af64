"""A real Celery worker, fed through Redis, does the background work against the real database."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import time

import pytest
from django.utils import timezone

from payments.models import PaymentRequest
from shop.catalog import LOTS_AVAILABLE_CACHE_SECONDS
from shop.models import Order, Reservation
from shop.tasks import reservations_release_expired_task

WAIT_SECONDS = 45
worker_test = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def wait_for(condition, worker, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        assert worker.process.poll() is None, f"the worker exited:\n{worker.output()}"
        time.sleep(0.1)
    pytest.fail(f"{what} within {WAIT_SECONDS} s; worker output:\n{worker.output()}")


def written_emails(folder) -> list:
    """Email files the file backend has finished (it ends each message with a line of dashes)."""
    return [path for path in folder.glob("*.log") if path.read_bytes().endswith(b"-" * 79 + b"\n")]


def place_order(client, order_payload) -> dict:
    response = client.post("/api/v1/orders/", order_payload, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


@worker_test
def test_placing_an_order_emails_the_customer_through_the_worker(
    celery_worker, anvil, client, make_node, order_payload, tmp_path
):
    make_node()

    placed = place_order(client, order_payload)

    files = wait_for(lambda: written_emails(tmp_path / "emails"), celery_worker, "no email was written")
    assert len(files) == 1
    message = email.message_from_bytes(files[0].read_bytes(), policy=email.policy.default)
    assert message["To"] == order_payload["email"]
    assert placed["reference"] in message["Subject"]
    body = message.get_body(preferencelist=("plain",)).get_content()
    assert placed["payment"]["address"] in body
    assert f"Send exactly {placed['payment']['amount']} ETH" in body


@worker_test
def test_the_worker_expires_an_order_whose_payment_window_ended_and_frees_its_lot(
    celery_worker, anvil, client, make_node, order_payload
):
    make_node()
    placed = place_order(client, order_payload)
    past = timezone.now() - dt.timedelta(minutes=1)
    Reservation.objects.filter(order__reference=placed["reference"]).update(expires_at=past)
    PaymentRequest.objects.filter(order__reference=placed["reference"]).update(expires_at=past)

    sent = reservations_release_expired_task.delay()

    order = wait_for(
        lambda: Order.objects.filter(reference=placed["reference"], status="expired").first(),
        celery_worker,
        "the overdue order was not expired",
    )
    wait_for(lambda: f"[{sent.id}] succeeded" in celery_worker.output(), celery_worker, "the worker did not report")
    event = order.events.last()
    assert (event.from_status, event.to_status, event.actor) == ("awaiting_payment", "expired", "system")
    assert not Reservation.objects.filter(order=order, released_at__isnull=True).exists()
    # The count shown comes from this process's cache, at most LOTS_AVAILABLE_CACHE_SECONDS old (shop/catalog.py)
    deadline = time.monotonic() + LOTS_AVAILABLE_CACHE_SECONDS + 3
    while client.get("/api/v1/catalog/").json()["lots_available"] != 1:
        assert time.monotonic() < deadline, "the freed lot is not shown"
        time.sleep(0.1)
    read = client.get(f"/api/v1/orders/{placed['reference']}/", headers={"X-Order-Token": placed["access_token"]})
    assert read.json()["status"] == "expired"

"""A real Celery worker, fed through Redis, does the background work against the real database."""

from __future__ import annotations

import datetime as dt
import email
import email.policy

import pytest
from django.utils import timezone

from orders.capacity_shown import LOTS_AVAILABLE_CACHE_SECONDS
from orders.models import Order, Reservation
from orders.tasks import reservations_release_expired_task
from payments.models import PaymentRequest
from tests.placing import order_posted

WAIT_SECONDS = 45
worker_test = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def written_emails(folder) -> list:
    """Email files the file backend has finished (it ends each message with a line of dashes)."""
    return [path for path in folder.glob("*.log") if path.read_bytes().endswith(b"-" * 79 + b"\n")]


@worker_test
def test_placing_an_order_emails_the_customer_through_the_worker(
    celery_worker, anvil, client, make_node, order_payload, tmp_path
):
    make_node()

    placed = order_posted(client, order_payload)

    files = celery_worker.wait_for(lambda: written_emails(tmp_path / "emails"), "no email was written", WAIT_SECONDS)
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
    placed = order_posted(client, order_payload)
    past = timezone.now() - dt.timedelta(minutes=1)
    Reservation.objects.filter(order__reference=placed["reference"]).update(expires_at=past)
    PaymentRequest.objects.filter(order__reference=placed["reference"]).update(expires_at=past)

    sent = reservations_release_expired_task.delay()

    order = celery_worker.wait_for(
        lambda: Order.objects.filter(reference=placed["reference"], status="expired").first(),
        "the overdue order was not expired",
        WAIT_SECONDS,
    )
    celery_worker.wait_for(lambda: f"[{sent.id}] succeeded" in celery_worker.output(), "the worker did not report")
    event = order.events.last()
    assert (event.from_status, event.to_status, event.actor) == ("awaiting_payment", "expired", "system")
    assert not Reservation.objects.filter(order=order, released_at__isnull=True).exists()
    # The count shown comes from this process's cache, at most LOTS_AVAILABLE_CACHE_SECONDS old
    # (orders/capacity_shown.py)
    celery_worker.wait_for(
        lambda: client.get("/api/v1/catalog/").json()["lots_available"] == 1,
        "the freed lot is not shown",
        LOTS_AVAILABLE_CACHE_SECONDS + 3,
    )
    read = client.get(f"/api/v1/orders/{placed['reference']}/", headers={"X-Order-Token": placed["access_token"]})
    assert read.json()["status"] == "expired"

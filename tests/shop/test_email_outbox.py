"""Customer emails go through an outbox: stored with the change, sent once, sent later when sending failed."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core import mail
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from core.jobs.tasks import jobs_send_due_task
from orders.models import OutgoingEmail
from orders.outbox import email_send
from tests.servers import free_port
from tests.stored_rows import jobs_lost

pytestmark = pytest.mark.django_db


@pytest.fixture
def smtp_down(settings):
    """The SMTP backend, pointed at a loopback port where nothing listens: every send is refused."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    return settings


def test_placing_an_order_stores_its_order_received_email_with_the_order(make_node, place_order):
    make_node()

    body = place_order()  # the test's transaction never commits: no worker was asked to send yet

    email = OutgoingEmail.objects.get(order__reference=body["reference"])
    assert (email.name, email.sent_at, email.attempts) == ("order_received", None, 0)
    assert mail.outbox == []
    # with the job that sends it, in the same transaction
    job = Job.objects.get(kind=JobKind.EMAIL_SEND, args={"email_id": email.pk})
    assert (job.done_at, job.attempts) == (None, 0)


def test_an_email_whose_smtp_server_is_down_stays_due_and_beat_sends_it_once_the_server_is_back(
    make_node, place_order, smtp_down
):
    # Given an order placed while the SMTP server refuses connections, and the worker's try to send it
    make_node()
    body = place_order()
    email = OutgoingEmail.objects.get(order__reference=body["reference"])
    with pytest.raises(ConnectionRefusedError):
        email_send(email_id=email.pk)  # the task retries this with backoff, then gives up
    email.refresh_from_db()
    assert (email.sent_at, email.attempts, email.claimed_until) == (None, 1, None)
    assert "Connection refused" in email.last_error or "ConnectionRefused" in email.last_error

    # When the server is back and beat looks for due emails a minute later
    smtp_down.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    jobs_lost(seconds_ago=120)
    assert jobs_send_due_task() == 1

    # Then the customer gets the email, once, and a later sweep sends nothing again
    assert [message.to for message in mail.outbox] == [["ada@example.org"]]
    assert body["reference"] in mail.outbox[0].subject
    email.refresh_from_db()
    assert email.sent_at is not None and email.last_error == ""
    assert jobs_send_due_task() == 0
    assert len(mail.outbox) == 1


def test_a_stored_email_sent_twice_by_redelivered_tasks_reaches_the_customer_once(make_node, place_order):
    make_node()
    email = OutgoingEmail.objects.get(order__reference=place_order()["reference"])

    first, second = email_send(email_id=email.pk), email_send(email_id=email.pk)

    assert (first, second) == (True, False)
    assert len(mail.outbox) == 1


def test_an_email_claimed_by_a_worker_that_is_still_sending_is_not_sent_by_beat(make_node, place_order):
    make_node()
    place_order()
    jobs_lost(seconds_ago=120)
    Job.objects.update(claimed_until=timezone.now() + dt.timedelta(minutes=3))

    assert jobs_send_due_task() == 0
    assert mail.outbox == []

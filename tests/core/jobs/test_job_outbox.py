"""The job outbox (core/jobs): a job commits with its change or not at all, runs once per claim, survives a
lost send, a dead worker and a failing task, and one bad job never stops the others.

The jobs here are real: the "order received" email of an order placed through the API, sent by the real
Celery task (eager in the suite), and beat's real sweep.
"""

from __future__ import annotations

import datetime as dt

import pytest
from celery.exceptions import Retry
from django.core import mail
from django.db import transaction
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from core.jobs.outbox import job_enqueue, jobs_due
from core.jobs.tasks import jobs_send_due_task
from orders.models import Order, OutgoingEmail
from orders.tasks import email_send_task
from tests.shop.helpers import ORDERS_URL
from tests.stored_rows import jobs_lost, order_stored

pytestmark = pytest.mark.django_db
EMAIL_SEND = JobKind.EMAIL_SEND


@pytest.fixture
def email_job(make_node, place_order) -> Job:
    """The stored, never sent job of an order's "order received" email."""
    make_node()
    place_order()
    return Job.objects.get(kind=EMAIL_SEND)


def deliver(job: Job, delivery: str = "message-1"):
    """One Celery message for the job, as a worker receives it (its id is the delivery)."""
    return email_send_task.apply(kwargs={**job.args, "job_id": job.pk}, task_id=delivery).get()


def test_a_job_is_stored_with_its_change_and_sent_only_once_the_change_commits(db, django_capture_on_commit_callbacks):
    order = order_stored()
    with django_capture_on_commit_callbacks(execute=False) as sends:
        with pytest.raises(RuntimeError), transaction.atomic():
            job_enqueue(EMAIL_SEND, email_id=OutgoingEmail.objects.create(order=order, name="order_received").pk)
            raise RuntimeError("the change fails after its job was written")
        assert not Job.objects.exists() and not OutgoingEmail.objects.exists()
        assert sends == []  # nothing is sent for a change that never happened

        with transaction.atomic():
            kept = job_enqueue(EMAIL_SEND, email_id=OutgoingEmail.objects.create(order=order, name="order_received").pk)
    assert len(sends) == 1 and list(Job.objects.all()) == [kept]


def test_two_deliveries_of_one_job_run_it_once(email_job):
    # A second message of the same job (beat re-sent it, the broker delivered twice) while the first holds it
    Job.objects.filter(pk=email_job.pk).update(claimed_until=timezone.now() + dt.timedelta(minutes=5), claimed_by="a")
    assert deliver(email_job, "message-b") is None
    assert mail.outbox == []

    # When the first is done, a late delivery finds it done and sends nothing
    Job.objects.filter(pk=email_job.pk).update(claimed_until=None, claimed_by="")
    assert deliver(email_job, "message-a") is True
    assert deliver(email_job, "message-c") is None
    assert len(mail.outbox) == 1
    email_job.refresh_from_db()
    assert email_job.done_at is not None and email_job.attempts == 1


def test_the_message_of_a_worker_that_died_takes_its_claim_back_at_once(email_job):
    # Given a worker that claimed the job and died: the broker gives its unacknowledged message back
    Job.objects.filter(pk=email_job.pk).update(
        claimed_until=timezone.now() + dt.timedelta(minutes=5), claimed_by="message-1", attempts=1
    )

    # When that same message is delivered again, it runs; beat, meanwhile, does not send it again
    assert jobs_send_due_task() == 0
    assert deliver(email_job, "message-1") is True
    assert len(mail.outbox) == 1


def test_beat_sends_a_job_whose_send_was_lost_or_whose_worker_died_and_not_again_while_it_waits(email_job):
    # A send lost with the broker down; a claim of a dead worker that has lapsed
    jobs_lost(seconds_ago=120)
    assert jobs_send_due_task() == 1
    assert len(mail.outbox) == 1 and Job.objects.get().done_at is not None

    email = OutgoingEmail.objects.create(order=Order.objects.get(), name="order_received")
    another = job_enqueue(EMAIL_SEND, email_id=email.pk)
    past = timezone.now() - dt.timedelta(seconds=1)
    Job.objects.filter(pk=another.pk).update(due_at=past, claimed_until=past, claimed_by="dead-worker")
    with pytest.MonkeyPatch.context() as patch:  # a send that is still waiting in the queue (not run yet)
        patch.setattr("core.jobs.outbox.job_send", lambda job: None)
        assert jobs_send_due_task() == 1
        assert jobs_send_due_task() == 0  # not sent again before the task's lease is over
    another.refresh_from_db()
    assert another.due_at >= timezone.now() + dt.timedelta(minutes=4)


def test_a_failing_job_records_its_error_waits_and_gives_up_after_its_attempts(email_job, settings):
    settings.EMAIL_BACKEND = "tests.core.jobs.test_job_outbox.RefusingBackend"
    # Each delivery fails (Celery schedules its own retry): the error is on the row, the claim released, the
    # next try by beat later
    with pytest.raises(Retry):
        deliver(email_job)
    email_job.refresh_from_db()
    assert (email_job.attempts, email_job.claimed_until, email_job.done_at) == (1, None, None)
    assert "ConnectionRefusedError" in email_job.last_error
    assert email_job.due_at > timezone.now() + dt.timedelta(seconds=30)
    assert not jobs_due(timezone.now()).exists()

    # After its last attempt (10 for an email) it gives up: beat no longer sends it, an operator sees it
    Job.objects.filter(pk=email_job.pk).update(attempts=9)
    with pytest.raises(Retry):
        deliver(email_job, "message-10")
    email_job.refresh_from_db()
    assert email_job.gave_up_at is not None and list(Job.objects.given_up()) == [email_job]
    assert not jobs_due(timezone.now() + dt.timedelta(days=1)).exists()


def test_a_job_naming_a_task_that_no_longer_exists_gives_up_and_does_not_stop_the_others(email_job):
    renamed = Job.objects.create(kind="shop.tasks.a_task_renamed_since", args={}, due_at=timezone.now())
    Job.objects.filter(pk=renamed.pk).update(due_at=timezone.now() - dt.timedelta(hours=1))  # first in line
    jobs_lost(seconds_ago=120, pk=email_job.pk)

    assert jobs_send_due_task() == 1

    renamed.refresh_from_db()
    assert renamed.gave_up_at is not None and "a_task_renamed_since" in renamed.last_error
    assert len(mail.outbox) == 1  # the email behind it went out


def test_the_order_api_stores_the_email_job_in_the_order_transaction(db, anvil, make_node, api_client, order_payload):
    make_node()
    response = api_client.post(ORDERS_URL, {**order_payload, "email": "x"}, format="json")
    assert response.status_code == 400
    assert not Job.objects.exists()  # a refused order leaves no job behind


class RefusingBackend:
    """An email backend whose SMTP server refuses every connection."""

    def __init__(self, *args, **kwargs):
        pass

    def send_messages(self, messages):
        raise ConnectionRefusedError("the SMTP server refused the connection")

"""A stored "I have paid" whose check never reached the broker is a job that beat sends again once it is due
(JOB_RESEND_AFTER_SECONDS); checking it again credits nothing twice."""

from __future__ import annotations

import datetime as dt

from django.core import mail
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from core.jobs.outbox import jobs_due
from core.jobs.tasks import jobs_send_due_task
from payments.models import Credit, Notice
from payments.tasks import scan_all_networks_task
from tests.payments.verification.helpers import ORDERS_URL, order_of, payment_of, units
from tests.stored_rows import jobs_lost

VERIFY = JobKind.NOTICE_VERIFY


def press_paid_with_the_broker_down(client, capture, placed: dict, tx_hash: str = "") -> Notice:
    """'I have paid' whose on-commit send is lost, as with the broker down: the notice and its job are stored."""
    with capture(execute=False):
        response = client.post(
            f"{ORDERS_URL}{placed['reference']}/paid/",
            {"tx_hash": tx_hash} if tx_hash else {},
            content_type="application/json",
            headers={"X-Order-Token": placed["access_token"]},
        )
    assert response.status_code == 202, response.content
    return Notice.objects.filter(payment=payment_of(placed)).latest("pk")


def job_of(notice: Notice) -> Job:
    return Job.objects.get(kind=VERIFY, args={"notice_id": notice.pk})


def test_a_notice_whose_check_was_lost_is_checked_by_beat_and_credits_once(
    chain, customer, client, settings, django_capture_on_commit_callbacks
):
    # Given a paid order whose "I have paid" (with the hash) was stored but never checked
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    notice = press_paid_with_the_broker_down(client, django_capture_on_commit_callbacks, placed, sent.tx_hash)
    jobs_lost(seconds_ago=settings.JOB_RESEND_AFTER_SECONDS + 1, kind=VERIFY)
    mail.outbox.clear()

    # When beat's periodic scan and its job sweep run, twice
    with django_capture_on_commit_callbacks(execute=True):
        scan_all_networks_task.delay()
        assert jobs_send_due_task.delay().get() == 1
        scan_all_networks_task.delay()
        assert jobs_send_due_task.delay().get() == 0

    # Then the notice is checked, the transfer credited once, the order paid, and one email says so
    notice.refresh_from_db()
    assert notice.checked_at is not None and notice.result.startswith("found on")
    assert Credit.objects.filter(tx_hash=sent.tx_hash.lower()).count() == 1
    assert order_of(placed).status == "paid"
    assert [m.subject for m in mail.outbox] == [f"Order {placed['reference']}: payment confirmed"]
    # And its job is done: it is not sent again
    assert job_of(notice).done_at is not None
    assert not jobs_due(timezone.now() + dt.timedelta(days=1)).filter(kind=VERIFY).exists()


def test_only_checks_past_their_due_time_and_held_by_no_worker_are_sent_again(
    chain, customer, client, settings, django_capture_on_commit_callbacks
):
    # Given five notices whose checks were lost, in different situations
    placed = customer.order()
    press = press_paid_with_the_broker_down
    capture = django_capture_on_commit_callbacks
    lost = press(client, capture, placed, "0x" + "1" * 64)
    fresh = press(client, capture, placed, "0x" + "2" * 64)  # its own send may still be in flight
    held = press(client, capture, placed, "0x" + "3" * 64)  # a worker is checking it right now
    done = press(client, capture, placed, "0x" + "4" * 64)
    given_up = press(client, capture, placed, "0x" + "5" * 64)  # failed every attempt: for an operator
    for notice in (lost, held, done, given_up):
        jobs_lost(seconds_ago=settings.JOB_RESEND_AFTER_SECONDS + 1, pk=job_of(notice).pk)
    now = timezone.now()
    Job.objects.filter(pk=job_of(held).pk).update(claimed_until=now + dt.timedelta(minutes=1))
    Job.objects.filter(pk=job_of(done).pk).update(done_at=now)
    Job.objects.filter(pk=job_of(given_up).pk).update(gave_up_at=now, attempts=6)

    # When beat looks for jobs to send again
    again = list(jobs_due(now).filter(kind=VERIFY))

    # Then only the lost one, past its due time, held by no worker, not done, is sent again
    assert again == [job_of(lost)], {n.pk: job_of(n) for n in (lost, fresh, held, done, given_up)}

"""A stored "I have paid" whose check never reached the broker is sent again by the periodic scan, once
it is older than NOTICE_RECHECK_AFTER_SECONDS; checking it again credits nothing twice."""

from __future__ import annotations

import datetime as dt

from django.core import mail
from django.utils import timezone

from payments.models import Credit, Notice
from payments.notices import notices_to_recheck
from payments.tasks import scan_all_networks_task
from tests.verification.helpers import ORDERS_URL, order_of, payment_of, units


def press_paid_with_the_broker_down(client, capture, placed: dict, tx_hash: str = "") -> Notice:
    """'I have paid' whose on-commit enqueue is lost, as with the broker down: only the notice is stored."""
    with capture(execute=False):
        response = client.post(
            f"{ORDERS_URL}{placed['reference']}/paid/",
            {"tx_hash": tx_hash} if tx_hash else {},
            content_type="application/json",
            headers={"X-Order-Token": placed["access_token"]},
        )
    assert response.status_code == 202, response.content
    return Notice.objects.filter(payment=payment_of(placed)).latest("pk")


def age(notice: Notice, seconds: float) -> None:
    Notice.objects.filter(pk=notice.pk).update(created_at=timezone.now() - dt.timedelta(seconds=seconds))


def test_a_notice_whose_check_was_lost_is_checked_by_the_periodic_scan_and_credits_once(
    chain, customer, client, settings, django_capture_on_commit_callbacks
):
    # Given a paid order whose "I have paid" (with the hash) was stored but never checked
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    notice = press_paid_with_the_broker_down(client, django_capture_on_commit_callbacks, placed, sent.tx_hash)
    age(notice, settings.NOTICE_RECHECK_AFTER_SECONDS + 1)
    mail.outbox.clear()

    # When the beat's periodic scan runs, twice
    with django_capture_on_commit_callbacks(execute=True):
        scan_all_networks_task.delay()
        scan_all_networks_task.delay()

    # Then the notice is checked, the transfer credited once, the order paid, and one email says so
    notice.refresh_from_db()
    assert notice.checked_at is not None and notice.result.startswith("found on")
    assert Credit.objects.filter(tx_hash=sent.tx_hash.lower()).count() == 1
    assert order_of(placed).status == "paid"
    assert [m.subject for m in mail.outbox] == [f"Order {placed['reference']}: payment confirmed"]
    # And a checked notice is not sent again
    assert notice.pk not in notices_to_recheck(now=timezone.now())


def test_only_unchecked_notices_with_a_hash_past_the_grace_and_within_the_watch_are_sent_again(
    chain, customer, client, settings, django_capture_on_commit_callbacks
):
    # Given five notices whose checks were lost, of different ages and kinds
    placed = customer.order()
    press = press_paid_with_the_broker_down
    capture = django_capture_on_commit_callbacks
    lost = press(client, capture, placed, "0x" + "1" * 64)
    fresh = press(client, capture, placed, "0x" + "2" * 64)  # its own enqueue may still be in flight
    hashless = press(client, capture, placed)  # asks for a scan only, which the periodic pass is
    too_old = press(client, capture, placed, "0x" + "3" * 64)  # past the days an address is watched
    checked = press(client, capture, placed, "0x" + "4" * 64)
    for notice in (lost, hashless, checked):
        age(notice, settings.NOTICE_RECHECK_AFTER_SECONDS + 1)
    age(too_old, settings.PAYMENT_WATCH_DAYS * 86400 + 60)
    Notice.objects.filter(pk=checked.pk).update(checked_at=timezone.now())

    # When the periodic scan looks for notices to check again
    again = notices_to_recheck(now=timezone.now())

    # Then only the lost one, old enough, with a hash, not checked, is sent again
    assert again == [lost.pk], {n.pk: n for n in (lost, fresh, hashless, too_old, checked)}

"""Automatic preparation (AUTO_PREPARE), on a node behind the real sandboxed sshd: paying an order prepares it
and hands it over with no operator; off, the order waits for one; an operator sees an automatic start on the
console and stops it; and the "paid order waiting" metric counts only orders that wait on a person."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from orders import capacity
from orders.models import OrderEvent, OrderStatus
from provisioning.auto_prepare import AUTO_ACTOR, AUTO_START_FAILED, preparation_auto
from provisioning.models import AccessGrant, NodeState, PreparationRun, RunStatus
from provisioning.tasks import preparation_auto_task, preparation_run_task
from tests.metrics_scrape import scrape, value


def auto_jobs(order) -> int:
    return Job.objects.filter(kind=JobKind.PREPARATION_AUTO, args__order_id=order.pk).count()


@pytest.mark.django_db
def test_with_auto_prepare_on_paying_an_order_prepares_and_hands_it_over_with_no_operator(
    shared_preflight, ssh_node, fast_preparation, paid_order, settings, django_capture_on_commit_callbacks
):
    settings.AUTO_PREPARE = True
    # When a customer pays (the jobs stored with the payment run once it commits, as a worker runs them)
    with django_capture_on_commit_callbacks(execute=True):
        order = paid_order(preparation=fast_preparation)

    # Then the order was prepared by itself and is active, with working access, and no person acted
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE
    started = order.events.get(from_status=OrderStatus.PAID, to_status=OrderStatus.PREPARING)
    assert started.actor == AUTO_ACTOR
    assert set(order.events.values_list("actor", flat=True)) <= {"customer", "system", AUTO_ACTOR}
    assert AccessGrant.objects.handed_over().filter(order=order, node=ssh_node).exists()
    assert PreparationRun.objects.get(order=order).status == RunStatus.PASSED

    # And the job, sent again (a duplicate delivery), leaves an order no longer paid alone
    with django_capture_on_commit_callbacks(execute=True):
        assert preparation_auto_task(order.pk) is False
    assert PreparationRun.objects.filter(order=order).count() == 1


@pytest.mark.django_db
def test_with_auto_prepare_off_a_paid_order_waits_for_an_operator(
    shared_preflight, ssh_node, fast_preparation, paid_order, settings, client, django_capture_on_commit_callbacks
):
    settings.AUTO_PREPARE = False
    with django_capture_on_commit_callbacks(execute=True):
        order = paid_order(preparation=fast_preparation)
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID and auto_jobs(order) == 0
    assert not PreparationRun.objects.filter(order=order).exists()
    # And the metric counts it as waiting on a person
    OrderEvent.objects.filter(order=order, to_status="paid").update(
        created_at=timezone.now() - dt.timedelta(minutes=40)
    )
    assert value(scrape(client), "shop_paid_unprepared_oldest_seconds") >= 40 * 60


@pytest.mark.django_db
def test_an_operator_sees_an_automatic_start_and_stops_it_and_the_order_waits_for_a_person(
    shared_preflight,
    ssh_node,
    fast_preparation,
    paid_order,
    settings,
    client,
    operator,
    django_capture_on_commit_callbacks,
):
    settings.AUTO_PREPARE = True
    # Given an order paid with AUTO_PREPARE on, whose automatic start ran and whose run is queued (no worker yet)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        order = paid_order(preparation=fast_preparation)
    assert auto_jobs(order) == 1
    with django_capture_on_commit_callbacks(execute=False):
        assert preparation_auto(order_id=order.pk) is True
    order.refresh_from_db()
    assert order.status == OrderStatus.PREPARING

    # Then the console says it started automatically, and offers Stop
    client.force_login(operator)
    console = client.get("/ops/").content.decode()
    assert order.reference in console and "started automatically" in console
    assert f"/ops/orders/{order.reference}/stop/" in console

    # When the operator stops it
    response = client.post(f"/ops/orders/{order.reference}/stop/")

    # Then the run ended ("stopped by" the operator), the node is back (still held for the order), and the
    # order waits for a person
    assert response.status_code == 302
    order.refresh_from_db()
    ssh_node.refresh_from_db()
    run_ = PreparationRun.objects.get(order=order)
    assert (run_.status, run_.error) == (RunStatus.ERROR, f"stopped by {operator.username}")
    assert order.status == OrderStatus.PREPARATION_FAILED
    assert order.events.last().actor == operator.username
    assert ssh_node.state == NodeState.AVAILABLE and ssh_node not in capacity.free_nodes(timezone.now())
    assert not AccessGrant.objects.live().filter(order=order).exists()
    assert "stopped by" in client.get("/ops/").content.decode()

    # And the jobs of before (the automatic start, the queued run), delivered now, change nothing
    with django_capture_on_commit_callbacks(execute=True):
        for callback in sent:
            callback()
        preparation_run_task(run_.pk)
    order.refresh_from_db()
    run_.refresh_from_db()
    assert order.status == OrderStatus.PREPARATION_FAILED and run_.status == RunStatus.ERROR


@pytest.mark.django_db
def test_with_auto_prepare_on_the_waiting_metric_counts_only_orders_whose_automatic_start_failed(
    shared_preflight, ssh_node, fast_preparation, paid_order, settings, client, django_capture_on_commit_callbacks
):
    settings.AUTO_PREPARE = True
    # Given an order paid long ago whose automatic start has not run yet: it waits on no person
    with django_capture_on_commit_callbacks(execute=False) as sent:
        order = paid_order(preparation=fast_preparation)
    OrderEvent.objects.filter(order=order, to_status="paid").update(created_at=timezone.now() - dt.timedelta(hours=2))
    assert value(scrape(client), "shop_paid_unprepared_oldest_seconds") == 0

    # When its node is gone before the start runs (its hold released, none free)
    capacity.release_lots(order=order, now=timezone.now(), reason="the test takes the node away")
    ssh_node.state = NodeState.MAINTENANCE
    ssh_node.save(update_fields=["state"])
    with django_capture_on_commit_callbacks(execute=True):
        for callback in sent:
            callback()

    # Then the order stays paid with a note saying why, and it now waits on a person, counted from the note
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID
    note = order.events.filter(actor=AUTO_ACTOR).last()
    assert note is not None and AUTO_START_FAILED in note.reason
    OrderEvent.objects.filter(pk=note.pk).update(created_at=timezone.now() - dt.timedelta(minutes=31))
    assert 31 * 60 <= value(scrape(client), "shop_paid_unprepared_oldest_seconds") < 32 * 60

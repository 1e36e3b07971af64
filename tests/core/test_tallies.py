"""The tallies /metrics reads (core/tallies): PostgreSQL triggers keep them equal to a count of the rows, in the
writer's transaction, through creates, status changes, bulk updates, deletes and rollbacks; a counter never goes
down when its rows are deleted."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.db.models import Count

from core.tallies.reading import tallied
from orders.models import Order
from provisioning.models import Node, PreparationRun, RunStatus
from tests.stored_rows import order_stored

pytestmark = pytest.mark.django_db


def counted() -> dict[str, int]:
    return dict(Order.objects.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))


def orders_tally() -> dict[str, int]:
    return {label: n for label, n in tallied("shop_orders").items() if n}


def test_the_orders_tally_is_the_count_of_orders_by_status_whatever_writes_them():
    first, second, third = (order_stored(reference=f"B2-TALLY-000{i}") for i in range(3))
    assert orders_tally() == counted() == {"awaiting_payment": 3}

    first.status = "expired"
    first.save()  # every column written: only a changed status moves the tally
    Order.objects.filter(pk=second.pk).update(status="paid")
    Order.objects.filter(pk=second.pk).update(status="paid")  # the same status again
    Order.objects.filter(pk=third.pk).update(first_name="Grace")  # not the status
    assert orders_tally() == counted() == {"awaiting_payment": 1, "expired": 1, "paid": 1}

    Order.objects.filter(pk=first.pk).delete()
    assert orders_tally() == counted() == {"awaiting_payment": 1, "paid": 1}


def test_a_rolled_back_change_leaves_the_tally_as_it_was():
    order = order_stored()
    with pytest.raises(RuntimeError), transaction.atomic():
        Order.objects.filter(pk=order.pk).update(status="cancelled")
        order_stored(reference="B2-TALLY-0009")
        raise RuntimeError("the writer failed")
    assert orders_tally() == counted() == {"awaiting_payment": 1}


def test_finished_runs_are_counted_once_each_and_stay_counted_when_deleted():
    order = order_stored()
    node = Node.objects.create(name="node-tally", driver="local", host="127.0.0.1")
    run = PreparationRun.objects.create(order=order, node=node, requested_by="olga")  # queued: not finished
    for status in (RunStatus.RUNNING, RunStatus.FAILED, RunStatus.FAILED):
        PreparationRun.objects.filter(pk=run.pk).update(status=status)
    PreparationRun.objects.create(order=order, node=node, requested_by="olga", status=RunStatus.PASSED)
    assert tallied("provisioning_preparations") == {"failed": 1, "passed": 1}

    PreparationRun.objects.all().delete()
    assert tallied("provisioning_preparations") == {"failed": 1, "passed": 1}

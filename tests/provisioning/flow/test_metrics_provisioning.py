"""/metrics moved by the preparation on real nodes (the `local` driver, the sandboxed accounts): a paid order
waiting for its preparation, a preflight that fails and sets its node aside, a preparation that passes, and
the emails stored in the outbox on the way."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from orders.models import OrderEvent
from tests.metrics_scrape import scrape, value
from tests.provisioning.flow.test_preparation_rules import UNBALANCED, prepare


@pytest.mark.django_db
def test_a_paid_order_waits_then_one_preparation_fails_its_node_and_another_passes(
    local_node, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given two nodes, the first (held by the order) failing its preflight, and nothing waiting in the outbox
    local_node(name="a-bad", thresholds=UNBALANCED)
    before = scrape(client)
    assert value(before, "outbox_emails_pending") == 0
    assert value(before, "shop_lots_available") == 1
    assert value(before, "provisioning_nodes", state="available") == 1

    # When an order is placed and paid (its emails stored, not sent yet), then waits 45 minutes
    order = paid_order()
    local_node(name="b-good")
    entered = timezone.now() - dt.timedelta(minutes=45)
    OrderEvent.objects.filter(order=order, to_status="paid").update(created_at=entered)

    # Then the order shows as paid and waiting, its emails as pending, and the held lot as not for sale
    waiting = scrape(client)
    assert value(waiting, "shop_orders", status="paid") == 1
    assert 45 * 60 <= value(waiting, "shop_paid_unprepared_oldest_seconds") < 46 * 60
    assert value(waiting, "outbox_emails_pending") >= 1
    assert value(waiting, "shop_lots_available") == 1  # the second node, free
    assert value(waiting, "provisioning_nodes", state="available") == 2  # a hold is not a node state

    # When the operator triggers the preparation: the first node fails, the lot moves to the second, which passes
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then one preparation failed and one passed, the failed node is counted as failed, nothing waits any more
    done = scrape(client)
    assert value(done, "provisioning_preparations_total", result="failed") == 1
    assert value(done, "provisioning_preparations_total", result="passed") == 1
    assert value(done, "provisioning_nodes", state="failed") == 1
    assert value(done, "provisioning_nodes", state="in_use") == 1
    assert value(done, "shop_orders", status="paid") == 0
    assert value(done, "shop_orders", status="active") == 1
    assert value(done, "shop_paid_unprepared_oldest_seconds") == 0
    assert value(done, "shop_lots_available") == 0

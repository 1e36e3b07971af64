"""Preparation rules with the `local` driver: failures keep the report, a failed node's lot moves to a
free node, only operators trigger it, reminders come before the end."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core import mail
from django.utils import timezone

from orders.models import OrderStatus, Preparation
from provisioning.models import AccessGrant, NodeState, PreparationRun
from provisioning.tasks import access_reminders_task
from tests.placing import order_posted

PREPARE = "/api/v1/orders/{}/prepare/"
# One card "over 90 %" and the other "under 5 %" always holds with these: memory_balance fails.
UNBALANCED = {"balance_low_fraction": 1.0, "balance_high_fraction": 0.0}


def prepare(client, operator, order, capture):
    client.force_login(operator)
    with capture(execute=True):
        response = client.post(PREPARE.format(order.reference))
    order.refresh_from_db()
    return response


@pytest.mark.django_db
def test_a_failed_preflight_leaves_the_order_in_preparation_failed_with_its_report(
    local_node, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given the only node's thresholds make its memory_balance check fail
    node = local_node(thresholds=UNBALANCED)
    order = paid_order()

    # When the operator triggers the preparation
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the order waits for operators, with the report and the failing check named
    assert order.status == OrderStatus.PREPARATION_FAILED
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "failed" and "memory_balance" in run_.error
    failed = [check["name"] for check in run_.report["checks"] if check["status"] == "fail"]
    assert failed == ["memory_balance"]
    node.refresh_from_db()
    assert node.state == NodeState.FAILED
    assert not AccessGrant.objects.filter(order=order).exists()
    page = client.get(f"/ops/runs/{run_.pk}/").content.decode()
    assert "memory_balance" in page and "fail" in page

    # When the operators fix the node and retry
    node.thresholds, node.state = {}, NodeState.AVAILABLE
    node.save()
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then it passes and access is handed over
    assert order.status == OrderStatus.ACTIVE
    assert AccessGrant.objects.filter(order=order, revoked_at__isnull=True).count() == 1


@pytest.mark.django_db
def test_the_preparation_moves_by_itself_to_a_free_node_when_a_node_fails(
    local_node, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given two nodes, the first (held by the order) failing its preflight
    bad = local_node(name="a-bad", thresholds=UNBALANCED)
    order = paid_order()
    good = local_node(name="b-good")
    assert order.reservations.get(released_at__isnull=True).node == bad

    # When the operator triggers the preparation once
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the lot moved to the free node, which passed, and the customer got access there
    assert order.status == OrderStatus.ACTIVE
    runs = list(PreparationRun.objects.filter(order=order).order_by("created_at"))
    assert [(r.node.name, r.status) for r in runs] == [("a-bad", "failed"), ("b-good", "passed")]
    assert order.reservations.get(released_at__isnull=True).node == good
    assert AccessGrant.objects.get(order=order).node == good


@pytest.mark.django_db
def test_only_operators_trigger_a_preparation(paid_order, local_node, operator, reviewer, client):
    local_node()
    order = paid_order()
    # Anonymous, a reviewer and a customer with the order's token are refused; nothing starts
    assert client.post(PREPARE.format(order.reference)).status_code in (401, 403)
    assert client.post(PREPARE.format(order.reference), HTTP_X_ORDER_TOKEN=order.access_token).status_code in (401, 403)
    client.force_login(reviewer)
    assert client.post(PREPARE.format(order.reference)).status_code == 403
    assert client.get("/ops/").status_code == 403
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID and not PreparationRun.objects.exists()
    # The operator sees the order waiting in the console
    client.force_login(operator)
    assert order.reference in client.get("/ops/").content.decode()


@pytest.mark.django_db
def test_an_order_that_is_not_paid_cannot_be_prepared(anvil, client, order_payload, local_node, operator):
    local_node()
    body = order_posted(client, order_payload)
    client.force_login(operator)
    response = client.post(PREPARE.format(body["reference"]))
    assert response.status_code == 409 and "only a paid order" in response.json()["detail"]


@pytest.mark.django_db
def test_reminders_go_out_72_24_and_1_hours_before_the_end_once_each(
    local_node, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given an active rental
    local_node()
    order = paid_order(preparation="bare-node")
    Preparation.objects.filter(slug="bare-node").update(preflight_profile={})
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    assert order.status == OrderStatus.ACTIVE
    mail.outbox.clear()

    def hours_left(hours: float) -> None:
        AccessGrant.objects.filter(order=order).update(ends_at=timezone.now() + dt.timedelta(hours=hours))
        with django_capture_on_commit_callbacks(execute=True):  # the stored reminder is sent once it commits
            access_reminders_task()

    # When the end comes closer, passing each reminder point, with the task running twice each time
    hours_left(100)
    hours_left(71)
    hours_left(71)
    hours_left(23)
    hours_left(0.5)
    hours_left(0.5)

    # Then exactly three reminders went out, in the customer's language
    subjects = [message.subject for message in mail.outbox]
    assert len(subjects) == 3, subjects
    assert "72 hours" in subjects[0] and "24 hours" in subjects[1] and "1 hour" in subjects[2]


@pytest.mark.django_db
def test_an_operator_token_from_drf_create_token_starts_a_preparation(
    shared_preflight, paid_order, local_node, operator, client, django_capture_on_commit_callbacks
):
    # Given an operator's API token, made the way docs/staff-guide.md says
    local_node()
    order = paid_order()
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("drf_create_token", operator.username, stdout=out)
    key = out.getvalue().split()[2]

    # When a script calls the API with it (no session)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(PREPARE.format(order.reference), HTTP_AUTHORIZATION=f"Token {key}")

    # Then the preparation ran and a wrong token is refused
    assert response.status_code == 202
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE
    assert client.post(PREPARE.format(order.reference), HTTP_AUTHORIZATION="Token nope").status_code in (401, 403)

"""A preparation that does not end `active` leaves no access behind: in a two-lot order where one node passed
(its account made) and the other failed, the account on the node that passed is removed before that node is
sold again, and no account ever exists on a node without a grant row that will revoke it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from orders.models import OrderStatus
from orders.orders import order_cancel
from provisioning.access import account_name
from provisioning.models import AccessGrant, NodeState, PreparationRun
from provisioning.tasks import preparation_resume_stuck_task
from tests.provisioning.flow.node_faults import prepare

BROKEN_PYTHON = "/nonexistent/python3"  # the preflight cannot start: the node fails its run


@pytest.mark.django_db
def test_the_access_given_on_the_node_that_passed_is_revoked_before_that_node_is_sold_again(
    local_node,
    fast_preparation,
    paid_order,
    operator,
    client,
    sandbox_sshd,
    django_capture_on_commit_callbacks,
    settings,
):
    # Given a paid two-lot order held on a sound node and on one whose preflight cannot run, and no other node
    # (a shop that lets one order take its whole fleet of two)
    settings.MAX_LOTS_PER_UNPAID_ORDER = "100%"
    good = local_node(name="a-good")
    local_node(name="b-broken", python=BROKEN_PYTHON)
    order = paid_order(lots=2, preparation=fast_preparation)

    # When the operator prepares it: the sound node passes (its account is made), the other fails
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the order failed, and the account made on the sound node is gone again, its grant revoked
    assert order.status == OrderStatus.PREPARATION_FAILED
    assert {run.node.name: run.status for run in PreparationRun.objects.filter(order=order)} == {
        "a-good": "passed",
        "b-broken": "error",
    }
    assert sandbox_sshd.entry("passwd", account_name(order)) is None
    assert not AccessGrant.objects.filter(order=order, revoked_at__isnull=True).exists()
    good.refresh_from_db()
    assert good.state == NodeState.AVAILABLE

    # When the order is cancelled and the sound node is sold and prepared for the next customer
    order_cancel(order_id=order.pk, actor="olga", reason="the customer gave up")
    following = paid_order(preparation=fast_preparation)
    assert following.reservations.get(released_at__isnull=True).node == good
    prepare(client, operator, following, django_capture_on_commit_callbacks)

    # Then it is handed over there: one live grant and one account on the node, the next customer's
    assert following.status == OrderStatus.ACTIVE, following.events.last().reason
    assert list(AccessGrant.objects.filter(node=good, revoked_at__isnull=True)) == [
        AccessGrant.objects.get(order=following)
    ]
    assert sandbox_sshd.entry("passwd", account_name(following)) is not None
    assert sandbox_sshd.entry("passwd", account_name(order)) is None


@pytest.mark.django_db
def test_no_account_is_made_on_a_node_whose_grant_row_cannot_be_written(
    local_node, fast_preparation, paid_order, operator, client, sandbox_sshd, django_capture_on_commit_callbacks
):
    # Given a node that still carries a live grant of an earlier order (its revocation has not happened yet)
    node = local_node(name="still-granted")
    earlier = paid_order(preparation=fast_preparation)
    order_cancel(order_id=earlier.pk, actor="olga", reason="a test's earlier order")
    AccessGrant.objects.create(
        order=earlier, node=node, account=account_name(earlier), host="127.0.0.1", port=22,
        host_key_fingerprint="local", ssh_key_fingerprint=earlier.ssh_key_fingerprint,
        ends_at=timezone.now() + dt.timedelta(days=1),
    )  # fmt: skip
    order = paid_order(preparation=fast_preparation)

    # When the next order is prepared on it
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then no account was made for it (none that no grant row would ever revoke), and the run says why
    assert sandbox_sshd.entry("passwd", account_name(order)) is None
    assert not AccessGrant.objects.filter(order=order).exists()
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "error" and earlier.reference in run_.error, run_.error
    assert order.status == OrderStatus.PREPARATION_FAILED


@pytest.mark.django_db
def test_beat_withdraws_access_left_live_on_an_order_that_is_neither_active_nor_preparing(
    local_node, fast_preparation, paid_order, operator, client, sandbox_sshd, django_capture_on_commit_callbacks
):
    # Given what the shop left before withdrawals existed: a cancelled order whose account still lives on a
    # node that is for sale again
    node = local_node(name="left-granted")
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    assert sandbox_sshd.entry("passwd", account_name(order)) is not None
    type(order).objects.filter(pk=order.pk).update(status=OrderStatus.CANCELLED)
    order.reservations.update(released_at=timezone.now())
    type(node).objects.filter(pk=node.pk).update(state=NodeState.AVAILABLE)

    # When beat's periodic pass runs
    with django_capture_on_commit_callbacks(execute=True):
        preparation_resume_stuck_task()

    # Then the account is gone, its grant revoked, and the node is for sale without it
    assert sandbox_sshd.entry("passwd", account_name(order)) is None
    assert not AccessGrant.objects.filter(order=order, revoked_at__isnull=True).exists()
    node.refresh_from_db()
    assert node.state == NodeState.AVAILABLE

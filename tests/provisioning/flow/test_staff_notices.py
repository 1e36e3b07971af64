"""Operators hear of a node that failed its preflight and of an order whose preparation failed, at the step,
once: the preparation's conclusion run again (a retry, beat) tells nobody again."""

from __future__ import annotations

import pytest
from django.core import mail

from orders.models import OrderStatus
from provisioning.models import NodeState
from provisioning.prepare import preparation_conclude
from provisioning.states import node_state_set
from tests.provisioning.flow.node_faults import prepare

OPS = "ops@example.org"
UNBALANCED = {"balance_low_fraction": 1.0, "balance_high_fraction": 0.0}  # memory_balance always fails


def operators_mail() -> list[str]:
    return [message.subject for message in mail.outbox if OPS in message.to]


@pytest.mark.django_db
def test_a_failed_preflight_tells_the_operators_the_node_and_the_order_failed_once(
    local_node, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given operators with an email, and a paid order whose only node fails its preflight
    operator.email = OPS
    operator.save()
    node = local_node(thresholds=UNBALANCED)
    order = paid_order()
    mail.outbox.clear()

    # When the operator prepares it, and the conclusion runs again (a retry)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        preparation_conclude(order_id=order.pk, actor="system")

    # Then operators were told once that the node failed and once that the order's preparation failed
    node.refresh_from_db()
    assert node.state == NodeState.FAILED and order.status == OrderStatus.PREPARATION_FAILED
    subjects = operators_mail()
    assert sorted(s.split("] ", 1)[1] for s in subjects) == [
        f"Node {node.name} failed",
        f"Order {order.reference}: the preparation failed",
    ]
    node_mail = next(m for m in mail.outbox if m.subject.endswith(f"Node {node.name} failed"))
    assert f"/admin/fleet/node/{node.pk}/change/" in node_mail.body and "memory_balance" in node_mail.body
    assert order.access_token not in "".join(m.body for m in mail.outbox if OPS in m.to)


@pytest.mark.django_db
def test_a_node_an_operator_puts_in_maintenance_tells_nobody(local_node, operator, django_capture_on_commit_callbacks):
    operator.email = OPS
    operator.save()
    node = local_node()

    with django_capture_on_commit_callbacks(execute=True):
        node_state_set(node_id=node.pk, to=NodeState.MAINTENANCE, actor="olga", reason="new fans")

    assert not operators_mail()

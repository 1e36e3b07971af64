"""The customer hears of each step of the preparation and of the end of the rental: started, failed (and what
happens next), access ready, ended. One email per step, however often beat or a retry runs it again."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core import mail
from django.utils import timezone

from orders.models import OrderStatus, OutgoingEmail
from orders.order_links import order_receipt_path, order_status_path
from provisioning.models import AccessGrant, NodeState
from provisioning.prepare import preparation_start
from provisioning.tasks import access_revoke_due_task
from tests import security_keys
from tests.provisioning.flow.node_faults import prepare

# One card "over 90 %" and the other "under 5 %" always holds with these: memory_balance fails.
UNBALANCED = {"balance_low_fraction": 1.0, "balance_high_fraction": 0.0}


def subjects() -> list[str]:
    return [message.subject for message in mail.outbox]


@pytest.mark.django_db
def test_a_preparation_that_fails_on_the_only_node_tells_the_customer_it_started_then_what_happens_next(
    local_node, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given a paid order whose only node fails its preflight (a profile that checks the memory balance)
    node = local_node(thresholds=UNBALANCED)
    order = paid_order()
    mail.outbox.clear()

    # When the operator prepares it
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the customer was told it started, then that it is delayed: operators repair it, no rental time is lost
    assert order.status == OrderStatus.PREPARATION_FAILED
    ref = order.reference
    assert subjects() == [f"Order {ref}: preparation started", f"Order {ref}: preparation delayed"]
    delayed = mail.outbox[1].body
    assert "did not pass its GPU preflight" in delayed and "no paid time is lost" in delayed
    assert "refunded" in delayed and order_status_path(order) in delayed

    # When the operators fix the node and retry
    node.thresholds, node.state = {}, NodeState.AVAILABLE
    node.save()
    mail.outbox.clear()
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the customer hears it started again, then gets access
    assert order.status == OrderStatus.ACTIVE
    assert subjects()[0] == f"Order {ref}: preparation started"
    assert len(subjects()) == 2 and "access" in subjects()[1].lower()


@pytest.mark.django_db
def test_a_refused_ssh_key_tells_the_customer_to_send_another_key(
    local_node, fast_preparation, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given a paid order (placed in Spanish) whose stored key cannot be installed
    local_node()
    order = paid_order(preparation=fast_preparation)
    broken = security_keys.sk_line(security_keys.BROKEN["ed25519-sk-type-name-only"]())
    type(order).objects.filter(pk=order.pk).update(ssh_public_key=broken, language="es")
    mail.outbox.clear()

    # When the operator prepares it
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the customer is told, in Spanish, that it is the key and how to give another one
    assert order.status == OrderStatus.PREPARATION_FAILED
    assert subjects() == [
        f"Pedido {order.reference}: preparación iniciada",
        f"Pedido {order.reference}: preparación retrasada",
    ]
    assert "clave pública SSH" in mail.outbox[1].body


@pytest.mark.django_db
def test_the_end_of_the_rental_emails_the_customer_once_with_the_receipt(
    shared_preflight,
    local_node,
    fast_preparation,
    paid_order,
    operator,
    client,
    django_capture_on_commit_callbacks,
    settings,
):
    settings.DATA_GRACE_HOURS = 0  # the end itself, no time to take data home (tests/.../test_data_grace.py)
    # Given an active rental (placed in French)
    local_node()
    order = paid_order(preparation=fast_preparation)
    type(order).objects.filter(pk=order.pk).update(language="fr")
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    assert order.status == OrderStatus.ACTIVE
    mail.outbox.clear()

    # When its end comes and beat's revocation pass runs, twice
    AccessGrant.objects.filter(order=order).update(ends_at=timezone.now() - dt.timedelta(seconds=1))
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            access_revoke_due_task()

    # Then the order ended and the customer got one email, in French, with the receipt's link
    order.refresh_from_db()
    assert order.status == OrderStatus.ENDED
    assert subjects() == [f"Commande {order.reference} : location terminée"]
    assert order_receipt_path(order) in mail.outbox[0].body


@pytest.mark.django_db
def test_restarting_a_stuck_preparation_sends_no_second_started_email(
    local_node, paid_order, django_capture_on_commit_callbacks
):
    # Given a preparation started whose runs have not been picked up by a worker yet (nothing sent to the broker)
    local_node()
    order = paid_order()
    with django_capture_on_commit_callbacks(execute=False):
        preparation_start(order_id=order.pk, actor="olga")
        # When the operator presses "restart what is stuck", twice
        preparation_start(order_id=order.pk, actor="olga")
        preparation_start(order_id=order.pk, actor="olga")

    # Then the customer's "preparation started" email is stored once
    order.refresh_from_db()
    assert order.status == OrderStatus.PREPARING
    assert OutgoingEmail.objects.filter(order=order, name="preparation_started").count() == 1

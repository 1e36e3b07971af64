"""An order whose payment window ends unpaid tells its customer so, once, in the customer's language."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core import mail
from django.utils import timezone

from orders.models import OutgoingEmail, Reservation
from orders.order_links import order_status_path
from orders.tasks import reservations_release_expired_task
from payments.models import PaymentRequest
from tests.stored_rows import an_order

pytestmark = pytest.mark.django_db

SUBJECTS = {
    "en": "Order {}: expired without payment",
    "es": "Pedido {}: caducado sin pago",
    "fr": "Commande {} : expirée sans paiement",
}


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_an_unpaid_order_whose_window_ends_is_expired_and_its_customer_emailed_once(
    language, make_node, django_capture_on_commit_callbacks
):
    # Given an unpaid order placed in the customer's language, whose payment window has just ended
    order = an_order(language=language, nodes=[make_node()])
    mail.outbox.clear()
    past = timezone.now() - dt.timedelta(seconds=1)
    Reservation.objects.filter(order=order).update(expires_at=past)
    PaymentRequest.objects.filter(order=order).update(expires_at=past)

    # When beat's expiry pass runs, and runs again
    with django_capture_on_commit_callbacks(execute=True):
        assert reservations_release_expired_task() == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert reservations_release_expired_task() == 0

    # Then the customer got one email saying so, in their language, with the order's private link
    order.refresh_from_db()
    assert order.status == "expired"
    assert [m.subject for m in mail.outbox] == [SUBJECTS[language].format(order.reference)]
    assert order_status_path(order) in mail.outbox[0].body
    assert OutgoingEmail.objects.filter(order=order, name="order_expired").count() == 1

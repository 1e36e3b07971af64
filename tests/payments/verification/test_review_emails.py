"""A reviewer's decision on a payment that needed one reaches the customer: accepted (the order is paid) or
refused (the order is cancelled and the money goes back), once each, in the customer's language."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core import mail
from django.utils import timezone

from orders.order_links import order_receipt_path, order_status_path
from payments.models import PaymentRequest
from payments.review import Decision, ReviewError, payment_review_decide
from tests.payments.verification.helpers import order_of, payment_of, units

ACCEPTED = {
    "en": "Order {}: payment accepted",
    "es": "Pedido {}: pago aceptado",
    "fr": "Commande {} : paiement accepté",
}
REJECTED = "Order {}: payment refused, order cancelled"


def late_payment(chain, customer, scan_pass, language: str = "en") -> dict:
    """A full USDC payment that arrived after its deadline: the order waits for a reviewer."""
    placed = customer.order(language=language)
    PaymentRequest.objects.filter(order__reference=placed["reference"]).update(
        expires_at=timezone.now() - dt.timedelta(minutes=5)
    )
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("late", "needs_review")
    mail.outbox.clear()
    return placed


def decide(placed: dict, decision: str, capture) -> None:
    with capture(execute=True):
        payment_review_decide(
            payment_id=payment_of(placed).pk, decision=decision, reason="checked the transfer", reviewer="rita"
        )


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_a_reviewer_accepting_a_late_payment_emails_the_customer_once_with_the_receipt(
    language, chain, customer, scan_pass, django_capture_on_commit_callbacks
):
    # Given a late payment waiting for a reviewer, the order placed in the customer's language
    placed = late_payment(chain, customer, scan_pass, language)

    # When the reviewer accepts it, then tries to decide again, and the chain is scanned again
    decide(placed, Decision.ACCEPT, django_capture_on_commit_callbacks)
    with pytest.raises(ReviewError):
        decide(placed, Decision.ACCEPT, django_capture_on_commit_callbacks)
    scan_pass()

    # Then the order is paid and the customer got one email saying so, with the receipt and the order's link
    order = order_of(placed)
    assert order.status == "paid"
    assert [m.subject for m in mail.outbox] == [ACCEPTED[language].format(placed["reference"])]
    body = mail.outbox[0].body
    assert order_receipt_path(order) in body and order_status_path(order) in body


def test_a_reviewer_refusing_a_late_payment_emails_the_cancellation_then_the_refund(
    chain, customer, scan_pass, django_capture_on_commit_callbacks
):
    # Given a late payment waiting for a reviewer
    placed = late_payment(chain, customer, scan_pass)

    # When the reviewer rejects it
    decide(placed, Decision.REJECT, django_capture_on_commit_callbacks)
    scan_pass()

    # Then the order is cancelled; the customer is told so once, then asked where the money goes back
    order = order_of(placed)
    assert order.status == "cancelled"
    subjects = [m.subject for m in mail.outbox]
    assert subjects[0] == REJECTED.format(placed["reference"])
    assert subjects.count(subjects[0]) == 1
    assert any("refund" in subject for subject in subjects[1:]), subjects
    assert order_status_path(order) in mail.outbox[0].body

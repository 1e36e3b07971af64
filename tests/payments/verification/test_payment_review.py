"""Reviewers settle payment exceptions with a reason; each role can do its own work and nothing else."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from orders.models import Reservation
from orders.orders import orders_expire_overdue
from payments.models import PaymentEvent, PaymentRequest
from payments.review import Decision, ReviewError, payment_review_decide
from provisioning.models import Node
from tests.payments.verification.helpers import CATALOG_URL, order_of, order_steps, payment_of, units
from tests.staff import STAFF_PASSWORD

PAYMENTS_ADMIN = "/admin/payments/paymentrequest/"
ORDERS_ADMIN = "/admin/orders/order/"


def test_a_reviewer_accepts_a_late_payment_with_a_reason_and_the_order_is_paid(late_payment, reviewer, scan_pass):
    # Given a late payment waiting for review
    placed = late_payment

    # When the reviewer accepts it, saying why
    payment_review_decide(
        payment_id=payment_of(placed).pk,
        decision=Decision.ACCEPT,
        reason="5 minutes late; lots still free",
        reviewer="rita",
    )

    # Then the payment is confirmed, the order paid, and the decision is an event with the reviewer and the reason
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    event = payment_of(placed).events.last()
    assert (event.from_status, event.to_status, event.actor) == ("late", "confirmed", "reviewer rita")
    assert event.reason == "5 minutes late; lots still free"
    assert order_steps(placed)[-1] == ("needs_review", "paid", "reviewer rita")
    # And a later pass keeps the reviewer's decision
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")


def test_a_reviewer_accepts_a_late_payment_through_the_admin_action(late_payment, reviewer, client):
    # Given a late payment, and the reviewer logged into the admin, who sees the accept action
    placed = late_payment
    payment = payment_of(placed)
    assert client.login(username="rita", password=STAFF_PASSWORD)
    listing = client.get(PAYMENTS_ADMIN)
    assert listing.status_code == 200
    assert 'value="accept"' in listing.content.decode()

    # When the reviewer runs "accept" on it with a reason
    response = client.post(
        PAYMENTS_ADMIN, {"action": "accept", "_selected_action": [payment.pk], "reason": "customer wrote: bank delay"}
    )

    # Then the order is paid and the reason is kept in the payment's events
    assert response.status_code == 302
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    event = payment_of(placed).events.last()
    assert (event.actor, event.reason) == ("reviewer rita", "customer wrote: bank delay")
    assert payment_of(placed).reviewed_by == "rita"


def test_a_decision_without_a_reason_is_refused(late_payment, reviewer, client):
    # Given a late payment waiting for review
    placed = late_payment
    payment = payment_of(placed)
    events = PaymentEvent.objects.count()

    # When the reviewer accepts it without a reason, in code and in the admin
    with pytest.raises(ReviewError, match="A reason is required"):
        payment_review_decide(payment_id=payment.pk, decision=Decision.ACCEPT, reason="  ", reviewer="rita")
    client.login(username="rita", password=STAFF_PASSWORD)
    response = client.post(PAYMENTS_ADMIN, {"action": "accept", "_selected_action": [payment.pk], "reason": ""})

    # Then the admin asks for the reason again, and nothing is decided
    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    assert (payment_of(placed).status, order_of(placed).status) == ("late", "needs_review")
    assert PaymentEvent.objects.count() == events
    assert payment_of(placed).reviewed_at is None


def test_a_reviewer_can_neither_change_nodes_nor_cancel_orders(chain, customer, reviewer, client):
    # Given an order awaiting payment, its node, and the reviewer logged into the admin
    placed = customer.order()
    node = Node.objects.get()
    client.login(username="rita", password=STAFF_PASSWORD)

    # When the reviewer opens the node's change page, posts a change to it, and runs "cancel" on the order
    page = client.get(f"/admin/fleet/node/{node.pk}/change/")
    change = client.post(f"/admin/fleet/node/{node.pk}/change/", {"name": "renamed", "state": "maintenance"})
    orders = client.get(ORDERS_ADMIN)
    cancel = client.post(ORDERS_ADMIN, {"action": "cancel_orders", "_selected_action": [order_of(placed).pk]})

    # Then the node pages are forbidden, the cancel action is not offered, and nothing changed
    assert (page.status_code, change.status_code) == (403, 403)
    assert Node.objects.get().name == node.name
    assert orders.status_code == 200
    assert 'value="cancel_orders"' not in orders.content.decode()
    # Back to the changelist: "cancel" is not among the reviewer's actions (personal data export/erase are)
    assert (cancel.status_code, cancel["Location"]) == (302, ORDERS_ADMIN)
    assert order_of(placed).status == "awaiting_payment"


def test_an_operator_cannot_see_or_run_the_payment_review(late_payment, operator, client):
    # Given a late payment and an operator logged into the admin
    placed = late_payment
    payment = payment_of(placed)
    client.login(username=operator.username, password=STAFF_PASSWORD)

    # When the operator opens the payments list, a payment, and posts "accept" with a reason
    listing = client.get(PAYMENTS_ADMIN)
    detail = client.get(f"{PAYMENTS_ADMIN}{payment.pk}/change/")
    accept = client.post(PAYMENTS_ADMIN, {"action": "accept", "_selected_action": [payment.pk], "reason": "looks ok"})

    # Then each is forbidden and the payment still waits for a reviewer
    assert (listing.status_code, detail.status_code, accept.status_code) == (403, 403, 403)
    assert (payment_of(placed).status, order_of(placed).status) == ("late", "needs_review")
    assert not operator.has_perm("payments.review_payment")


def test_accepting_money_that_arrived_after_the_order_expired_holds_its_lot_again(
    chain, customer, scan_pass, reviewer, client
):
    # Given an order that expired (its only lot released), then got its full payment late
    placed = customer.order()
    past = timezone.now() - dt.timedelta(minutes=1)
    Reservation.objects.filter(order=order_of(placed)).update(expires_at=past)
    PaymentRequest.objects.filter(order=order_of(placed)).update(expires_at=past)
    orders_expire_overdue()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    assert (order_of(placed).status, client.get(CATALOG_URL).json()["lots_available"]) == ("needs_review", 1)

    # When the reviewer accepts the payment
    payment_review_decide(
        payment_id=payment_of(placed).pk, decision=Decision.ACCEPT, reason="lot still free", reviewer="rita"
    )

    # Then the paid order holds its lot again: it is no longer offered to the next customer
    assert order_of(placed).status == "paid"
    assert Reservation.objects.filter(order=order_of(placed), released_at__isnull=True).count() == 1
    assert client.get(CATALOG_URL).json()["lots_available"] == 0

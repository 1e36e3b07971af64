"""An order's life after placement: allowed transitions, expiry of unpaid orders, cancellation, the admin."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from pytest_django.asserts import assertContains, assertRedirects

from core.transition_event import TransitionNotAllowed
from orders.capacity import lots_available
from orders.models import Duration, Order, OrderEvent, Preparation, Reservation
from orders.orders import ORDER_TRANSITIONS, OrderInputError, order_cancel, order_transition, orders_expire_overdue
from orders.sshkeys import parse_ssh_public_key
from orders.tasks import reservations_release_expired_task
from payments.models import Asset
from shop.placement import OrderRequest, order_create
from tests.stored_rows import an_order

pytestmark = pytest.mark.django_db

ALL_STATUSES = list(ORDER_TRANSITIONS)


@pytest.fixture
def placed(make_node):
    """An order awaiting payment for `lots` lots (on as many fresh nodes), stored as placing it stores it."""

    def place(lots: int = 1, **fields) -> Order:
        return an_order(lots=lots, nodes=[make_node() for _ in range(lots)], **fields)

    return place


def now() -> dt.datetime:
    return timezone.now()


def another_customer(payload: dict) -> OrderRequest:
    """What a second customer asks for, built directly: the checks of build_order_request run at the real time."""
    return OrderRequest(
        lots=1,
        duration=Duration.objects.get(days=payload["duration_days"]),
        preparation=Preparation.objects.get(slug=payload["preparation"]),
        first_name="Grace",
        last_name="Hopper",
        email="grace@example.org",
        ssh_public_key=payload["ssh_public_key"],
        ssh_key_fingerprint=parse_ssh_public_key(payload["ssh_public_key"]).fingerprint,
        asset=Asset.objects.select_related("network").get(network__slug="local", symbol="ETH"),
        language="en",
    )


@pytest.mark.parametrize(
    ("start", "to"),
    [
        ("awaiting_payment", "active"),
        ("awaiting_payment", "preparing"),
        ("awaiting_payment", "ended"),
        ("expired", "paid"),
        ("cancelled", "awaiting_payment"),
        ("ended", "active"),
        ("active", "cancelled"),
    ],
)
def test_a_transition_outside_the_table_is_refused_and_changes_nothing(placed, start, to):
    # Given an order in status `start`
    order = placed()
    Order.objects.filter(pk=order.pk).update(status=start)
    order.refresh_from_db()
    events_before = OrderEvent.objects.filter(order=order).count()

    # When a change to `to` is attempted / Then it is refused
    with pytest.raises(TransitionNotAllowed):
        order_transition(order=order, to=to, actor="system")

    # And the order and its history are as they were
    order.refresh_from_db()
    assert order.status == start
    assert OrderEvent.objects.filter(order=order).count() == events_before


def test_the_transition_table_knows_every_status_and_names_only_known_ones():
    # Given the table / Then every status has an entry, and every target is a status
    assert set(ORDER_TRANSITIONS) == {
        "awaiting_payment",
        "payment_reported",
        "paid",
        "needs_review",
        "expired",
        "cancelled",
        "preparing",
        "preparation_failed",
        "active",
        "ended",
    }
    assert all(targets <= set(ALL_STATUSES) for targets in ORDER_TRANSITIONS.values())
    assert ORDER_TRANSITIONS["cancelled"] == frozenset()
    assert ORDER_TRANSITIONS["ended"] == frozenset()


def test_an_allowed_transition_is_saved_and_recorded_with_who_and_why(placed):
    # Given an order awaiting payment
    order = placed()

    # When the customer reports the payment
    order_transition(order=order, to="payment_reported", actor="customer", reason="pressed I have paid")

    # Then the new status is stored and the event says from, to, who and why
    order.refresh_from_db()
    assert order.status == "payment_reported"
    event = OrderEvent.objects.filter(order=order).last()
    assert (event.from_status, event.to_status, event.actor, event.reason) == (
        "awaiting_payment",
        "payment_reported",
        "customer",
        "pressed I have paid",
    )


def test_placing_an_order_records_its_first_event(placed):
    # Given / When an order is placed
    order = placed()

    # Then its history starts with the placement by the customer
    events = list(OrderEvent.objects.filter(order=order).values_list("from_status", "to_status", "actor"))
    assert events == [("", "awaiting_payment", "customer")]


def test_an_unpaid_order_expires_after_its_window_and_its_lot_is_sold_again(placed):
    # Given an unpaid order holding the only lot
    order = placed()
    deadline = order.payment.expires_at
    assert lots_available(now()) == 0

    # When the expiry pass runs after the payment window ended
    expired = orders_expire_overdue(now=deadline + dt.timedelta(seconds=1))

    # Then the order is expired by the system, its hold released, and the lot is available again
    assert expired == 1
    order.refresh_from_db()
    assert order.status == "expired"
    event = OrderEvent.objects.filter(order=order).last()
    assert (event.from_status, event.to_status, event.actor) == ("awaiting_payment", "expired", "system")
    reservation = Reservation.objects.get(order=order)
    assert reservation.released_at is not None
    assert reservation.release_reason == "payment window ended"
    assert lots_available(now()) == 1


def test_a_reported_but_unconfirmed_payment_does_not_keep_the_lot_forever(placed):
    # Given an order whose customer pressed "I have paid", but nothing arrived
    order = placed()
    order_transition(order=order, to="payment_reported", actor="customer")

    # When the expiry pass runs after the window
    orders_expire_overdue(now=order.payment.expires_at + dt.timedelta(minutes=1))

    # Then it expires too, releasing the lot
    order.refresh_from_db()
    assert order.status == "expired"
    assert lots_available(now()) == 1


def test_the_periodic_expiry_task_runs_on_a_shop_with_nothing_overdue(make_node):
    # Given a shop with free lots and no order
    make_node()

    # When the beat's expiry task runs / Then it completes and expires nothing
    assert reservations_release_expired_task.delay().get() == 0
    assert lots_available(now()) == 1


def test_the_expiry_pass_leaves_an_order_within_its_window_alone(placed):
    # Given an order placed just now
    order = placed()

    # When the expiry pass runs one minute before its deadline
    expired = orders_expire_overdue(now=order.payment.expires_at - dt.timedelta(minutes=1))

    # Then nothing expires and the lot stays held
    assert expired == 0
    order.refresh_from_db()
    assert order.status == "awaiting_payment"
    assert Reservation.objects.get(order=order).released_at is None
    assert lots_available(now()) == 0


def test_the_expiry_pass_expires_only_the_overdue_order(make_node, placed):
    # Given an order placed now, and another placed twenty minutes later
    first = placed()
    later = an_order(nodes=[make_node()], now=now() + dt.timedelta(minutes=20))

    # When the expiry pass runs once the first window ended, while the second is still open
    expired = orders_expire_overdue(now=first.payment.expires_at + dt.timedelta(minutes=1))

    # Then only the first expires
    assert expired == 1
    first.refresh_from_db()
    later.refresh_from_db()
    assert first.status == "expired"
    assert later.status == "awaiting_payment"
    assert Reservation.objects.get(order=later).released_at is None


def test_a_new_order_takes_the_lot_of_an_order_whose_window_ended(anvil, placed, order_payload):
    # Given the only lot held by an unpaid order
    first = placed()

    # When another customer orders after the first window ended (before any expiry pass ran)
    second = order_create(
        request=another_customer(order_payload),
        now=first.payment.expires_at + dt.timedelta(minutes=1),
    ).order

    # Then the first order is expired and the lot now belongs to the second
    first.refresh_from_db()
    assert first.status == "expired"
    assert Reservation.objects.get(order=second, released_at__isnull=True).node_id == (
        Reservation.objects.get(order=first).node_id
    )


def test_cancelling_an_order_releases_its_lots_and_records_the_reason(placed, make_node):
    # Given an order holding two lots of a fleet of four (an unpaid order holds at most half of it)
    make_node(), make_node()
    order = placed(lots=2)
    order_node_count = Reservation.objects.filter(order=order, released_at__isnull=True).count()
    assert order_node_count == 2
    assert lots_available(now()) == 2

    # When staff cancel it, saying why
    order_cancel(order_id=order.pk, actor="ops-alice", reason="customer asked by email")

    # Then it is cancelled, both lots are free again, and the event keeps who and why
    order.refresh_from_db()
    assert order.status == "cancelled"
    assert lots_available(now()) == 4
    assert set(Reservation.objects.filter(order=order).values_list("release_reason", flat=True)) == {
        "cancelled: customer asked by email"
    }
    event = OrderEvent.objects.filter(order=order).last()
    assert (event.to_status, event.actor, event.reason) == ("cancelled", "ops-alice", "customer asked by email")


def test_cancelling_without_a_reason_is_refused(placed):
    # Given an order / When staff try to cancel it without a reason
    order = placed()
    with pytest.raises(OrderInputError) as refused:
        order_cancel(order_id=order.pk, actor="ops-alice", reason="  ")

    # Then they are asked why, and the order still holds its lot
    assert refused.value.field == "reason"
    order.refresh_from_db()
    assert order.status == "awaiting_payment"
    assert lots_available(now()) == 0


def test_a_cancelled_order_cannot_be_cancelled_again(placed):
    # Given a cancelled order
    order = placed()
    order_cancel(order_id=order.pk, actor="ops-alice", reason="duplicate")

    # When it is cancelled again / Then it is refused
    with pytest.raises(TransitionNotAllowed):
        order_cancel(order_id=order.pk, actor="ops-bob", reason="again")
    assert OrderEvent.objects.filter(order=order, to_status="cancelled").count() == 1


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", "root@example.org", "a-long-password-1")
    client.force_login(user)
    return client


def test_the_admin_lists_orders(admin_client, placed):
    # Given a placed order
    order = placed()

    # When a superuser opens the order list
    response = admin_client.get("/admin/orders/order/")

    # Then the order is listed with its status
    assertContains(response, order.reference)
    assertContains(response, "Awaiting payment")


def test_the_admin_shows_an_orders_events_reservations_and_payment_request(admin_client, placed):
    # Given a placed order
    order = placed()
    node = Reservation.objects.get(order=order).node

    # When a superuser opens it in the admin
    response = admin_client.get(f"/admin/orders/order/{order.pk}/change/")

    # Then the page shows its history, the node it holds and its payment request
    assertContains(response, order.reference)
    assertContains(response, "order placed")
    assertContains(response, node.name)
    assertContains(response, order.payment.address)
    assertContains(response, str(order.payment.start_block))


def test_the_admin_cancel_action_cancels_the_order_and_releases_its_lot(admin_client, placed):
    # Given a placed order holding the only lot
    order = placed()

    # When a superuser runs the "cancel" action on it
    response = admin_client.post(
        "/admin/orders/order/", {"action": "cancel_orders", "_selected_action": [order.pk]}, follow=True
    )

    # Then the order is cancelled by that user, the lot is free again, and the admin says so
    assertRedirects(response, "/admin/orders/order/")
    assertContains(response, f"{order.reference}: cancelled")
    order.refresh_from_db()
    assert order.status == "cancelled"
    event = OrderEvent.objects.filter(order=order).last()
    assert (event.actor, event.reason) == ("root", "cancelled in the admin")
    assert lots_available(now()) == 1


def test_the_admin_cancel_action_warns_about_an_order_that_cannot_be_cancelled(admin_client, placed):
    # Given an order that already ended
    order = placed()
    Order.objects.filter(pk=order.pk).update(status="ended")

    # When a superuser runs the "cancel" action on it
    response = admin_client.post(
        "/admin/orders/order/", {"action": "cancel_orders", "_selected_action": [order.pk]}, follow=True
    )

    # Then the admin warns that it cannot be cancelled, and it stays ended
    assertContains(response, f"{order.reference}: cannot be cancelled from ended")
    order.refresh_from_db()
    assert order.status == "ended"


@pytest.mark.parametrize("status", ["awaiting_payment", "paid", "active", "cancelled"])
def test_a_move_to_the_status_the_order_has_is_a_no_op_as_for_every_state_machine(placed, status):
    # Given an order in `status`
    order = placed()
    Order.objects.filter(pk=order.pk).update(status=status)
    order.refresh_from_db()
    events_before = OrderEvent.objects.filter(order=order).count()

    # When it is moved to that same status / Then nothing is written and the writer says so
    assert order_transition(order=order, to=status, actor="system") is False
    assert OrderEvent.objects.filter(order=order).count() == events_before

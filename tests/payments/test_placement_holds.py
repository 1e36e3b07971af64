"""Holding lots at placement in one statement (free nodes chosen and held at once), and lapsed holds released
before it, whoever places first: all or nothing, never a node held twice."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from orders import capacity
from orders.models import Order, OrderEvent, OutgoingEmail, Reservation
from orders.orders import OrderInputError, orders_expire_overdue_locked
from shop.placement import order_create
from tests.payments.test_capacity_race import assert_no_node_is_held_twice, run_together

race = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def held_by(anvil, make_node, order_request):
    """An order (placed through the service at `now`) holding `lots` lots, on as many fresh nodes."""

    def place(lots: int = 1, now: dt.datetime | None = None) -> Order:
        for _ in range(lots):
            make_node()
        return order_create(request=order_request(lots=lots), now=now).order

    return place


@pytest.mark.django_db
def test_free_nodes_are_held_lowest_first_and_a_held_one_is_skipped(held_by, make_node):
    # Given a node held by an order, and three free ones
    first = held_by()
    free = [make_node() for _ in range(3)]
    now = timezone.now()

    # When two lots are held for the same order again (its own first hold counts as taken)
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        held = capacity.reserve_free_lots(order=first, lots=2, expires_at=None, now=now)

    # Then the two lowest free nodes are held, with the given times
    assert held == [free[0].pk, free[1].pk]
    rows = Reservation.objects.filter(order=first, node_id__in=held)
    assert {(r.created_at, r.expires_at, r.released_at, r.release_reason) for r in rows} == {(now, None, None, "")}
    assert_no_node_is_held_twice()


def _prep(moment: dt.datetime) -> object:
    return Reservation._meta.get_field("created_at").get_db_prep_value(moment, connection)


@pytest.mark.django_db
@pytest.mark.parametrize("lots", [1, 3])
def test_the_hold_statement_built_once_is_the_one_the_orm_builds_for_each_moment(lots):
    # Given the statement as built (and kept) for this number of lots, with a stand-in where `now` goes
    sql, free_params, lapsed_params = capacity.hold_statement(lots)
    stand_in = _prep(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    assert stand_in in free_params and stand_in in lapsed_params

    # When a later moment is put in its place
    now = timezone.now()
    filled = [[_prep(now) if value == stand_in else value for value in part] for part in (free_params, lapsed_params)]

    # Then it selects the free nodes, and looks for lapsed holds, as the ORM's own queries for that moment do
    free, fresh_free = capacity.free_nodes(now).values(free_node=F("pk"))[:lots].query.sql_with_params()
    lapsed, fresh_lapsed = capacity.lapsed_holds(now).values("pk").query.sql_with_params()
    assert sql.startswith(f"WITH free AS ({free}) INSERT INTO")
    assert f"NOT EXISTS ({lapsed})" in sql
    assert filled == [list(fresh_free), list(fresh_lapsed)]


@pytest.mark.django_db
def test_asking_for_more_lots_than_are_free_holds_none_and_says_how_many_are(held_by, make_node):
    # Given one free node beside the order's own
    order = held_by()
    make_node()
    before = list(Reservation.objects.values_list("pk", flat=True))

    # When two are asked for
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        with pytest.raises(capacity.SoldOut) as refused:
            capacity.reserve_free_lots(order=order, lots=2, expires_at=None, now=timezone.now())

        # Then the refusal says one is free, and none was held (not even before a rollback)
        assert refused.value.available == 1
        assert list(Reservation.objects.values_list("pk", flat=True)) == before


@pytest.mark.django_db
def test_while_a_lapsed_hold_is_left_anywhere_nothing_is_held_and_the_caller_is_told(held_by, make_node):
    # Given an order whose window ended, its hold not released yet, and a free node beside it
    order = held_by()
    make_node()
    later = order.payment.expires_at + dt.timedelta(seconds=1)
    before = list(Reservation.objects.values_list("pk", flat=True))

    # When a lot is asked for after that moment
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        with pytest.raises(capacity.LapsedHolds):
            capacity.reserve_free_lots(order=order, lots=1, expires_at=None, now=later)

        # Then nothing is held: the lapsed hold is to be released first
        assert list(Reservation.objects.values_list("pk", flat=True)) == before


@pytest.mark.django_db
def test_a_node_whose_hold_lapsed_counts_as_free_once_the_lapsed_hold_is_released(held_by):
    # Given the only node, held by an order whose payment window ended
    order = held_by()
    later = order.payment.expires_at + dt.timedelta(seconds=1)

    # When the lapsed holds are released under the node locks, then a lot is held
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        assert orders_expire_overdue_locked(now=later) == 1
        held = capacity.reserve_free_lots(order=order, lots=1, expires_at=None, now=later)

    # Then the node is held again, once
    assert held == [Reservation.objects.get(order=order, released_at__isnull=False).node_id]
    assert_no_node_is_held_twice()


@pytest.mark.django_db
def test_with_nothing_overdue_the_expiry_step_changes_nothing(held_by):
    # Given an order well within its window
    order = held_by()

    # When the expiry step runs (as each placement does)
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        expired = orders_expire_overdue_locked(now=timezone.now())

    # Then nothing is expired or released
    assert expired == 0
    order.refresh_from_db()
    assert order.status == "awaiting_payment"
    assert Reservation.objects.get(order=order).released_at is None


@race
def test_customers_racing_for_a_lot_whose_hold_just_lapsed_get_one_order_and_the_old_one_expires_once(
    anvil, make_node, order_request
):
    # Given the only lot held by an unpaid order whose window has just ended (no expiry pass ran)
    node_id = make_node().pk
    request = order_request(lots=1)  # every customer saw the lot free
    stale = order_create(request=order_request(lots=1)).order
    after = stale.payment.expires_at + dt.timedelta(seconds=1)

    # When eight customers order at the same instant
    results = run_together(lambda: order_create(request=request, now=after))

    # Then one gets the lot; the others are told it is sold out
    placed = [result for result in results if not isinstance(result, Exception)]
    refused = [result for result in results if isinstance(result, Exception)]
    assert len(placed) == 1
    assert all(isinstance(error, OrderInputError) and error.field == "lots" for error in refused), refused
    live = Reservation.objects.filter(released_at__isnull=True)
    assert list(live.values_list("order_id", "node_id")) == [(placed[0].order.pk, node_id)]
    assert_no_node_is_held_twice()
    # And the lapsed order expired exactly once, with one email
    stale.refresh_from_db()
    assert stale.status == "expired"
    assert OrderEvent.objects.filter(order=stale, to_status="expired").count() == 1
    assert OutgoingEmail.objects.filter(order=stale, name="order_expired").count() == 1
    assert Order.objects.count() == 2

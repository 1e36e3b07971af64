"""Customers racing for the last lots on PostgreSQL: never oversold, and a loser leaves nothing behind."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.utils import timezone

from orders.models import Order, Reservation
from orders.orders import OrderInputError
from payments.models import AddressCursor, PaymentRequest
from shop.placement import order_create
from tests.api_answers import error_fields

CONTENDERS = 8
race = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def run_together(attempt, contenders: int = CONTENDERS) -> list:
    """Run `attempt()` in `contenders` threads released at the same instant; each thread has its own connection."""
    barrier = threading.Barrier(contenders, timeout=30)
    results: list = [None] * contenders

    def contender(slot: int) -> None:
        try:
            barrier.wait()
            results[slot] = attempt()
        except Exception as exc:  # the outcome of each attempt is what the test checks
            results[slot] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=contender, args=(slot,)) for slot in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a contender is stuck"
    return results


def assert_no_node_is_held_twice() -> None:
    live = Reservation.objects.filter(released_at__isnull=True)
    held = Counter(live.values_list("node_id", flat=True))
    assert all(count == 1 for count in held.values()), held


@race
def test_eight_customers_racing_for_the_last_lot_get_exactly_one_order(anvil, make_node, order_request):
    node = make_node()
    request = order_request(lots=1)  # every contender saw the lot free before the race

    results = run_together(lambda: order_create(request=request))

    placed = [result for result in results if not isinstance(result, Exception)]
    refused = [result for result in results if isinstance(result, Exception)]
    assert len(placed) == 1
    assert len(refused) == CONTENDERS - 1
    for error in refused:
        assert isinstance(error, OrderInputError), repr(error)
        assert (error.field, error.message) == ("lots", "Sold out: no lot is available right now.")
    assert list(Order.objects.values_list("pk", flat=True)) == [placed[0].order.pk]
    assert PaymentRequest.objects.count() == 1
    assert list(Reservation.objects.values_list("order_id", "node_id")) == [(placed[0].order.pk, node.pk)]
    assert_no_node_is_held_twice()
    assert AddressCursor.objects.get().next_index == placed[0].order.payment.derivation_index + 1


@race
def test_eight_customers_wanting_two_of_three_lots_through_the_api_get_exactly_one_order(
    anvil, make_node, order_payload
):
    nodes = [make_node() for _ in range(3)]
    payload = {**order_payload, "lots": 2}

    results = run_together(lambda: Client().post("/api/v1/orders/", payload, content_type="application/json"))

    assert all(hasattr(response, "status_code") for response in results), results
    statuses = Counter(response.status_code for response in results)
    assert statuses == {201: 1, 400: CONTENDERS - 1}, [response.content for response in results]
    for response in results:
        if response.status_code == 400:
            assert error_fields(response, "invalid") == {"lots": ["Only 1 lot is available right now."]}
    (winner,) = [response.json() for response in results if response.status_code == 201]
    order = Order.objects.get()
    assert order.reference == winner["reference"]
    assert PaymentRequest.objects.count() == 1
    held = set(Reservation.objects.filter(order=order).values_list("node_id", flat=True))
    assert len(held) == 2 and held < {node.pk for node in nodes}
    assert Reservation.objects.count() == 2
    assert_no_node_is_held_twice()
    assert Client().get("/api/v1/catalog/").json()["lots_available"] == 1


@race
def test_racing_customers_each_get_their_own_lot_while_lots_last(anvil, make_node, order_request):
    for _ in range(5):
        make_node()
    request = order_request(lots=1)

    results = run_together(lambda: order_create(request=request))

    placed = [result.order for result in results if not isinstance(result, Exception)]
    refused = [result for result in results if isinstance(result, Exception)]
    assert len(placed) == 5
    assert all(isinstance(error, OrderInputError) and error.field == "lots" for error in refused), refused
    assert Order.objects.count() == PaymentRequest.objects.count() == Reservation.objects.count() == 5
    assert_no_node_is_held_twice()
    indexes = sorted(order.payment.derivation_index for order in placed)
    assert indexes == list(range(indexes[0], indexes[0] + 5))
    assert len({order.payment.address for order in placed}) == 5


def test_the_database_refuses_a_second_live_hold_on_a_node_even_when_the_application_is_bypassed(
    anvil, make_node, order_request
):
    node = make_node()
    first = order_create(request=order_request()).order
    make_node()
    other = order_create(request=order_request()).order

    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        Reservation.objects.create(order=other, node=node)
    assert "one_live_reservation_per_node" in str(refused.value)

    Reservation.objects.filter(order=first).update(released_at=timezone.now(), release_reason="test")
    Reservation.objects.create(order=other, node=node)  # a released hold no longer blocks the node
    assert Reservation.objects.filter(node=node).count() == 2
    assert_no_node_is_held_twice()

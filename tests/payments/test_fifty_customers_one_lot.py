"""Fifty customers ordering the last lot at once, on PostgreSQL: one order, forty-nine clear refusals."""

from __future__ import annotations

from collections import Counter

import pytest
from django.test import Client

from orders.models import Order, Reservation
from payments.models import PaymentRequest
from tests.payments.test_capacity_race import assert_no_node_is_held_twice, run_together
from tests.payments.verification.helpers import ORDERS_URL

race = pytest.mark.django_db(transaction=True, serialized_rollback=True)
CUSTOMERS = 50


@race
def test_fifty_customers_ordering_the_last_lot_at_once_get_one_order_and_forty_nine_sold_out_messages(
    anvil, make_node, order_payload
):
    # Given one lot left, seen free by every customer
    node = make_node()

    # When 50 customers place their order through the API at the same instant
    results = run_together(
        lambda: Client().post(ORDERS_URL, order_payload, content_type="application/json"), contenders=CUSTOMERS
    )

    # Then exactly one wins; the 49 others are told it is sold out, on the lots field
    assert all(hasattr(response, "status_code") for response in results), results
    assert Counter(response.status_code for response in results) == {201: 1, 400: CUSTOMERS - 1}
    refusals = {response.content for response in results if response.status_code == 400}
    assert [response.json() for response in results if response.status_code == 400][0] == {
        "lots": ["Sold out: no lot is available right now."]
    }
    assert len(refusals) == 1
    # And nothing is stored or held for the losers
    (winner,) = [response.json() for response in results if response.status_code == 201]
    assert list(Order.objects.values_list("reference", flat=True)) == [winner["reference"]]
    assert PaymentRequest.objects.count() == 1
    assert list(Reservation.objects.values_list("order__reference", "node_id")) == [(winner["reference"], node.pk)]
    assert_no_node_is_held_twice()

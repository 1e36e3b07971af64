"""Fifty customers ordering the last lot at once, on PostgreSQL: one order, forty-nine clear refusals."""

from __future__ import annotations

from collections import Counter

import pytest
from django.test import Client

from orders.models import Order, Reservation
from payments.models import PaymentRequest
from tests.api_answers import error_fields
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
    refusals = [error_fields(response, "invalid") for response in results if response.status_code == 400]
    assert refusals[0] == {"lots": ["Sold out: no lot is available right now."]}
    assert all(refusal == refusals[0] for refusal in refusals)  # the same answer but for each one's request_id
    sent = {
        response.content.replace(response["X-Request-ID"].encode(), b"")
        for response in results
        if response.status_code == 400
    }
    assert len(sent) == 1  # byte for byte
    # And nothing is stored or held for the losers
    (winner,) = [response.json() for response in results if response.status_code == 201]
    assert list(Order.objects.values_list("reference", flat=True)) == [winner["reference"]]
    assert PaymentRequest.objects.count() == 1
    assert list(Reservation.objects.values_list("order__reference", "node_id")) == [(winner["reference"], node.pk)]
    assert_no_node_is_held_twice()

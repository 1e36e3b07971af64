"""The API's expected failures are answered in one place (core.api_errors.ApiView): bad input of one field is a 400
naming the field, a service's refusal a 409 with its words, each with its stable `code`; the standard answers are
documented once, in status order; and a view of a token-addressed order still answers 405 to a method it lacks,
whatever the token."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory

from core.api_errors import (
    BAD_INPUT,
    LIMITED_BODY_READ,
    NOT_FOUND,
    RATE_LIMITED,
    STAFF_ONLY,
    TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    ApiView,
    documented,
)
from core.input_errors import OrderInputError
from orders.price_guard import PriceChanged


class Refusal(Exception):
    pass


class BadPreparation(Refusal):
    """A refusal that is also bad input of one field: the field wins."""


class Unexpected(Exception):
    pass


class ToyApi(ApiView):
    authentication_classes = ()
    refusals = (Refusal,)
    field_errors = {BadPreparation: "preparation"}
    raised: Exception = Exception("set by as_view")

    def post(self, request: Request) -> Response:
        raise self.raised


def answer_to(raised: Exception) -> Response:
    view = ToyApi.as_view(raised=raised)
    return view(APIRequestFactory().post("/toy/", {}, format="json"))


def test_an_order_input_error_is_a_400_listing_its_message_under_its_field():
    # When the service raises bad input of one field
    response = answer_to(OrderInputError("address", "This is not an address."))

    # Then the answer is the field's list of messages, as DRF's own validation answers
    assert response.status_code == 400
    assert response.data == {"address": ["This is not an address."], "code": "invalid"}


def test_a_named_refusal_is_a_409_with_its_words_as_the_detail():
    response = answer_to(Refusal("node-1 is rented: it is never rechecked"))

    assert response.status_code == 409
    assert response.data == {"detail": "node-1 is rented: it is never rechecked", "code": "conflict"}


def test_a_refusal_the_view_names_as_a_field_error_is_a_400_on_that_field():
    response = answer_to(BadPreparation("no preparation 'x'"))

    assert response.status_code == 400
    assert response.data == {"preparation": ["no preparation 'x'"], "code": "invalid"}


def test_a_coded_refusal_is_a_409_with_its_code_and_facts_in_any_view():
    response = answer_to(PriceChanged(Decimal("1234.5")))

    assert response.status_code == 409
    assert response.data == {
        "detail": "The price is now 1234.50 USD, not the total you expected. Check it and send again.",
        "code": "price_changed",
        "total_usd": "1234.50",
    }


def test_an_exception_the_view_does_not_name_is_not_swallowed():
    with pytest.raises(Unexpected):
        answer_to(Unexpected("broken"))


def test_the_documented_answers_are_the_views_own_and_the_standard_sets_in_status_order():
    # When a view documents its own answers with two standard sets
    answers = documented({201: "created", 404: NOT_FOUND, 409: "refused"}, STAFF_ONLY, LIMITED_BODY_READ)

    # Then every code is there once, in order, with the standard set's documented answer
    assert list(answers) == [201, 400, 401, 403, 404, 409, 413, 415, 429]
    assert (answers[400], answers[413], answers[415], answers[429]) == (
        BAD_INPUT,
        TOO_LARGE,
        UNSUPPORTED_MEDIA_TYPE,
        RATE_LIMITED,
    )


def test_a_views_own_answer_wins_over_a_standard_one_and_media_types_sort_by_status():
    answers = documented({(200, "text/csv"): "csv", 400: "its own"}, LIMITED_BODY_READ)

    assert list(answers) == [(200, "text/csv"), 400, 413, 415, 429]
    assert answers[400] == "its own"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["paid/", "extend/", "ssh-key/", "refunds/1/address/"])
def test_a_method_a_token_view_lacks_is_a_405_even_with_a_wrong_token(client, path):
    # When a GET reaches a POST-only view of an order, with a token that opens nothing
    response = client.get(f"/api/v1/orders/NOSUCH/{path}", HTTP_X_ORDER_TOKEN="wrong")

    # Then the method is refused before the order is looked up
    assert response.status_code == 405

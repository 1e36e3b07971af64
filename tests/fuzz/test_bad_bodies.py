"""Bodies no client should send: too large, too many fields, invalid UTF-8, nested too deeply, absurd numbers.

Each is refused with a status and a sentence (JSON under /api/, a page elsewhere), never a 500, and nothing
is stored.
"""

from __future__ import annotations

import json
import sys

import pytest
from django.conf import settings
from django.test import Client
from django.utils import translation

from tests.api_answers import error_fields
from tests.fuzz.forms import FORM, field_errors
from tests.fuzz.helpers import stored_state
from tests.shop.helpers import ORDERS_URL

pytestmark = [pytest.mark.django_db]

CONFIGURE = {"lots": "1", "duration_days": "7", "preparation": "pytorch-blackwell", "continue": "1"}


def too_large() -> int:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024


def many_fields() -> str:
    return "&".join(f"f{number}=1" for number in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))


@pytest.fixture
def nothing_stored(shop_with_lots):
    before = stored_state()
    yield
    assert stored_state() == before


UNREADABLE_BODIES = [
    pytest.param(
        lambda p: json.dumps({**p, "hypothesis": "x" * too_large()}),
        "application/json",
        413,
        "The request is too large: send at most 2.5 MB.",
        id="json-over-the-upload-limit",
    ),
    pytest.param(lambda p: many_fields(), FORM, 413, "The request has too many fields.", id="form-with-1001-fields"),
    pytest.param(
        lambda p: b'{"lots": 1, "first_name": "Ada \xff\xfe"}',
        "application/json",
        400,
        "JSON parse error",
        id="json-with-invalid-utf8",
    ),
    pytest.param(
        lambda p: "[" * 100_000 + "]" * 100_000,
        "application/json",
        400,
        "JSON parse error: the body is nested too deeply.",
        id="json-nested-100000-deep",
    ),
    pytest.param(lambda p: '{"lots": NaN}', "application/json", 400, "JSON parse error", id="json-nan"),
    pytest.param(
        lambda p: '{"lots": ' + "9" * 5000 + "}", "application/json", 400, "JSON parse error", id="json-5000-digits"
    ),
    pytest.param(lambda p: "lots=1", "text/plain", 415, "Unsupported media type", id="text-plain"),
]


# The stable `code` of each refusal of an unreadable body, by its status.
UNREADABLE_CODES = {400: "parse_error", 413: "too_large", 415: "unsupported_media_type"}


@pytest.mark.parametrize(("body", "content_type", "status", "message"), UNREADABLE_BODIES)
def test_an_unreadable_order_body_is_refused_with_a_sentence_saying_why_and_nothing_is_stored(
    nothing_stored, order_payload, body, content_type, status, message
):
    # Given free lots / When an order is posted with a body the API cannot take
    response = Client().post(ORDERS_URL, body(order_payload), content_type=content_type)

    # Then the answer is a JSON refusal with that status, saying what is wrong (and nothing is stored)
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert message in error_fields(response, UNREADABLE_CODES[status])["detail"]


def test_the_too_large_answer_speaks_the_customers_language(nothing_stored, order_payload):
    # Given a client that prefers Spanish / When it posts an order over the upload limit
    body = json.dumps({**order_payload, "hypothesis": "x" * too_large()})
    with translation.override("en"):  # the locale middleware leaves Spanish active in this thread otherwise
        response = Client().post(ORDERS_URL, body, content_type="application/json", headers={"Accept-Language": "es"})

    # Then the refusal is in Spanish
    assert response.status_code == 413
    assert error_fields(response, "too_large") == {
        "detail": "La solicitud es demasiado grande: envíe como máximo 2.5 MB."
    }


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (lambda: "lots=" + "1" * too_large(), 413, "The request is too large"),
        (many_fields, 413, "The request has too many fields."),
    ],
    ids=["over-the-upload-limit", "1001-fields"],
)
def test_a_form_too_large_gets_a_page_saying_so_not_a_bare_400(nothing_stored, body, status, message):
    # Given the first step of the wizard open in a browser (CSRF checked, as in production)
    browser = Client(enforce_csrf_checks=True)
    browser.get("/order/")
    token = browser.cookies["csrftoken"].value

    # When a form over Django's limits is posted
    response = browser.post("/order/", f"csrfmiddlewaretoken={token}&{body()}", content_type=FORM)

    # Then the page says what is wrong, in the site's layout (and nothing is stored)
    assert response.status_code == status
    assert message in response.content.decode()
    assert 'href="/order/"' in response.content.decode()  # the site's header, not Django's bare page


@pytest.mark.parametrize("endpoint", ["advisor", "i have paid"])
def test_every_api_body_nested_too_deeply_is_a_400_not_a_500(placed_order, endpoint):
    # Given an order and its token / When a body nested 100,000 deep is posted to an endpoint that reads JSON
    reference, token = placed_order["reference"], placed_order["access_token"]
    path = {"advisor": "/api/v1/advisor/", "i have paid": f"{ORDERS_URL}{reference}/paid/"}[endpoint]
    before = stored_state()
    response = Client().post(path, "[" * 100_000, content_type="application/json", headers={"X-Order-Token": token})

    # Then it is refused as unreadable, and nothing is recorded
    assert response.status_code == 400
    assert error_fields(response, "parse_error") == {"detail": "JSON parse error: the body is nested too deeply."}
    assert stored_state() == before


def test_a_deeply_nested_body_is_refused_before_parsing_even_where_the_recursion_limit_is_raised(placed_order):
    # Given a process whose recursion limit was raised (test tools do it; json's C decoder then overflows the C
    # stack instead of raising RecursionError, killing the process: seen in this suite before the depth check)
    reference, token = placed_order["reference"], placed_order["access_token"]
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000_000)
    try:
        # When a body nested 100,000 deep is posted
        response = Client().post(
            f"{ORDERS_URL}{reference}/paid/",
            "[" * 100_000,
            content_type="application/json",
            headers={"X-Order-Token": token},
        )
    finally:
        sys.setrecursionlimit(previous)

    # Then the process lives and the client is told why
    assert response.status_code == 400
    assert error_fields(response, "parse_error") == {"detail": "JSON parse error: the body is nested too deeply."}


API_NUMBERS = [
    pytest.param("lots", 10**100, "less than or equal to 64", id="lots-10**100"),
    pytest.param("lots", -(2**63), "greater than or equal to 1", id="lots-minus-2**63"),
    pytest.param("lots", 1.5, "valid integer", id="lots-1.5"),
    pytest.param("lots", True, "valid integer", id="lots-true"),
    pytest.param("lots", "", "valid integer", id="lots-empty"),
    pytest.param("duration_days", 2**64, "less than or equal to 366", id="duration-2**64"),
    pytest.param("duration_days", -7, "greater than or equal to 1", id="duration-negative"),
    pytest.param("duration_days", 0, "greater than or equal to 1", id="duration-zero"),
    pytest.param("first_name", "x" * 101, "no more than 100 characters", id="first-name-101-chars"),
    pytest.param("last_name", "x" * 151, "no more than 150 characters", id="last-name-151-chars"),
    pytest.param("hypothesis", "x" * 2001, "no more than 2000 characters", id="hypothesis-2001-chars"),
    pytest.param("ssh_public_key", "ssh-ed25519 " + "A" * 16_400, "no more than 16384 characters", id="key-too-long"),
    pytest.param("first_name", "Ada\x00", "Null characters are not allowed", id="nul-in-a-name"),
    pytest.param("hypothesis", 0, "Send this field as text", id="number-as-text"),
    pytest.param("email", ["ada@example.org"], "Send this field as text", id="list-as-text"),
]


@pytest.mark.parametrize(("field", "value", "message"), API_NUMBERS)
def test_an_absurd_value_in_one_field_is_a_400_on_that_field(nothing_stored, order_payload, field, value, message):
    # Given free lots / When an order is posted with one absurd value
    response = Client().post(ORDERS_URL, {**order_payload, field: value}, content_type="application/json")

    # Then the 400 names that field alone, with a message a person can act on
    assert response.status_code == 400
    errors = error_fields(response, "invalid")
    assert list(errors) == [field]
    assert message in " ".join(errors[field])


FORM_NUMBERS = [
    pytest.param("lots", str(10**100), "less than or equal to 64", id="lots-10**100"),
    pytest.param("lots", "-1", "greater than or equal to 1", id="lots-negative"),
    pytest.param("lots", "0", "greater than or equal to 1", id="lots-zero"),
    pytest.param("lots", "1.5", "Enter a whole number", id="lots-1.5"),
    pytest.param("lots", "", "This field is required", id="lots-empty"),
    pytest.param("lots", "9" * 5000, "Enter a whole number", id="lots-5000-digits"),
    pytest.param("duration_days", str(2**64), "Select a valid choice", id="duration-2**64"),
    pytest.param("duration_days", "-7", "Select a valid choice", id="duration-negative"),
]


@pytest.mark.parametrize(("field", "value", "message"), FORM_NUMBERS)
def test_an_absurd_number_in_the_first_step_shows_the_error_next_to_that_field(nothing_stored, field, value, message):
    # Given the first step / When it is posted with one absurd number
    response = Client().post("/order/", {**CONFIGURE, field: value})

    # Then the step is shown again with the error next to that field alone
    assert response.status_code == 200
    errors = field_errors(response)
    assert list(errors) == [field]
    assert message in errors[field]


def test_invalid_utf8_in_a_form_is_read_as_replacement_characters_and_refused_on_the_field(nothing_stored):
    # Given the first step / When the lots field carries bytes that are not UTF-8
    body = b"lots=%FF%FE&duration_days=7&preparation=pytorch-blackwell&continue=1"
    response = Client().post("/order/", body, content_type=FORM)

    # Then the step is shown again with the error on lots
    assert response.status_code == 200
    assert list(field_errors(response)) == ["lots"]

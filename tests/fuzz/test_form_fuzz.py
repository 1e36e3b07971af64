"""The order wizard's forms and "I have paid", fuzzed one field at a time through Django's test client.

Every other field holds a valid value, so the oracle is simple: the step either moves on with a sane value
kept, or shows the page again with an error next to that field (and no other). Never a 500, nothing stored.
"""

from __future__ import annotations

from urllib.parse import quote_from_bytes

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orders.models import Preparation
from orders.sshkeys import parse_ssh_public_key
from payments.models import Notice
from payments.notices import TX_HASH
from shop.order_input import MAX_LOTS_PER_ORDER
from tests.fuzz.conftest import FREE_LOTS
from tests.fuzz.forms import as_received, field_errors, post_form, raw
from tests.fuzz.helpers import stored_state, tally
from tests.fuzz.strategies import OPENSSH_PRIVATE_KEY, PUBLIC_KEY, RSA_PRIVATE_KEY, field_values, texts

pytestmark = [pytest.mark.django_db]

FUZZ = settings(
    max_examples=80,
    derandomize=True,  # the same cases on every run
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
CONFIGURE = {"lots": "1", "duration_days": "7", "preparation": "pytorch-blackwell", "continue": "1"}
CONTACT = {
    "first_name": "Ada",
    "last_name": "Lovelace Byron",
    "email": "ada@example.org",
    "ssh_public_key": f"{PUBLIC_KEY} ada@lab",
    "hypothesis_kind": "bigger_batch",
    "hypothesis": "A global batch of 2048 fits when sharded.",
    "terms": "on",
}
MAX_LENGTHS = {"first_name": 100, "last_name": 150, "email": 254, "ssh_public_key": 16_384, "hypothesis": 2000}


def wizard(client) -> dict:
    return client.session.get("order_wizard", {})


def assert_moved_on_or_showed_the_error_on(field: str, response, next_path: str) -> bool:
    """True when the step accepted the value (a redirect to the next step)."""
    assert response.status_code in (200, 302, 400), f"{response.status_code} for {field}"
    if response.status_code == 302:
        assert response["Location"] == next_path
        return True
    errors = field_errors(response)
    assert set(errors) == {field}, f"errors shown on {sorted(errors)} instead of {field!r}"
    assert "<li>" in errors[field]
    return False


def assert_not_echoed_raw(value: str, response) -> None:
    """Markup typed in a field comes back escaped, never as markup."""
    received = as_received(value).strip()
    if "<" in received and len(received) >= 8:
        assert received not in response.content.decode()


@pytest.fixture
def shop(shop_with_lots, client):
    before = stored_state()
    yield client
    # Then, whatever was typed, the wizard's steps stored and reserved nothing
    assert stored_state() == before


@pytest.mark.parametrize(
    ("field", "valid"),
    [
        ("lots", ("1", "2", str(FREE_LOTS))),
        ("duration_days", ("3", "7", "30")),
        ("preparation", ("bare-node", "two-card-distributed")),
    ],
)
@FUZZ
@given(data=st.data())
def test_configuring_with_any_value_in_one_field_moves_on_with_a_sane_choice_or_says_what_is_wrong(
    shop, field, valid, data
):
    # Given the first step, every field valid but one
    value = data.draw(field_values(*valid), label=field)

    # When it is posted
    response = post_form(shop, "/order/", {**CONFIGURE, field: value})
    tally(f"/order/ {field}", response.status_code)

    # Then either the wizard moved on with a choice that exists, or the field says what is wrong
    if assert_moved_on_or_showed_the_error_on(field, response, "/order/contact/"):
        chosen = wizard(shop)
        assert 1 <= chosen["lots"] <= FREE_LOTS
        assert chosen["duration_days"] in (3, 7, 30)
        assert Preparation.objects.filter(slug=chosen["preparation"], active=True).exists()
    assert_not_echoed_raw(value or "", response)


@FUZZ
@given(value=field_values("1", "3", "64", "65", "9" * 30))
def test_the_lots_prefilled_from_the_link_stay_within_one_order_whatever_the_link_says(shop, value: str | None):
    # Given a fresh visitor following a link to the wizard with ?lots= set to anything (the advisor links so)
    client = Client()
    query = "" if value is None else "?lots=" + quote_from_bytes(raw(value))

    # When the first step and the next one are opened
    response = client.get(f"/order/{query}")
    tally("/order/?lots= prefill", response.status_code)

    # Then both render, with the prefilled lots between 1 and the most one order may hold
    assert response.status_code == 200
    if value is None:  # (a plain visit stores nothing: the next step sends the visitor back to the first)
        assert "lots" not in wizard(client)
        assert client.get("/order/contact/")["Location"] == "/order/"
        return
    assert 1 <= wizard(client)["lots"] <= MAX_LOTS_PER_ORDER
    assert client.get("/order/contact/").status_code == 200


@pytest.fixture
def at_contact(shop):
    assert post_form(shop, "/order/", CONFIGURE).status_code == 302
    return shop


CONTACT_FIELDS = [
    ("first_name", ("Ada", "Zoë", "عائشة")),
    ("last_name", ("Lovelace Byron", "O'Brien-Núñez")),
    ("email", ("ada@example.org", "a.b+c@sub.example.co")),
    ("ssh_public_key", (f"{PUBLIC_KEY} <b>lab</b>", OPENSSH_PRIVATE_KEY, RSA_PRIVATE_KEY)),
    ("hypothesis_kind", ("", "bigger_batch", "faster_step", "make_possible")),
    ("hypothesis", ("", "<script>alert(1)</script>")),
    ("terms", ("on", "")),
]


@pytest.mark.parametrize(("field", "valid"), CONTACT_FIELDS)
@FUZZ
@given(data=st.data())
def test_contact_details_with_any_text_in_one_field_are_kept_as_typed_or_refused_on_that_field(
    at_contact, field, valid, data
):
    # Given the contact step, every field valid but one
    value = data.draw(field_values(*valid), label=field)

    # When it is posted
    response = post_form(at_contact, "/order/contact/", {**CONTACT, field: value})
    tally(f"/order/contact/ {field}", response.status_code)

    # Then either it is kept as typed (trimmed), or that field says what is wrong
    received = as_received(value or "").strip()
    if assert_moved_on_or_showed_the_error_on(field, response, "/order/payment/"):
        kept = wizard(at_contact)
        assert "\x00" not in received
        if field in MAX_LENGTHS:
            assert len(received) <= MAX_LENGTHS[field]
        if field == "ssh_public_key":
            assert kept[field] == parse_ssh_public_key(received).line
        elif field in ("first_name", "last_name", "hypothesis", "hypothesis_kind"):
            assert kept[field] == received
        elif field == "email":
            assert "@" in kept[field]
    assert_not_echoed_raw(value or "", response)
    # And a private key pasted by mistake never comes back in the page
    if "PRIVATE KEY" in received:
        assert response.status_code != 302
        assert received.splitlines()[1] not in response.content.decode()
        assert "private key" in field_errors(response)["ssh_public_key"]


@pytest.fixture
def at_payment(at_contact):
    assert post_form(at_contact, "/order/contact/", CONTACT).status_code == 302
    return at_contact


@FUZZ
@given(data=st.data())
def test_choosing_any_payment_option_moves_on_with_an_offered_one_or_says_what_is_wrong(at_payment, data):
    # Given the payment step (ETH on the local chain is offered)
    value = data.draw(field_values("local:ETH", "local:eth", "local:", ":ETH", "base:USDC", "local:ETH:x"))

    # When an option is posted
    response = post_form(at_payment, "/order/payment/", {"payment_option": value})
    tally("/order/payment/ payment_option", response.status_code)

    # Then the wizard moves on only with an offered asset
    if assert_moved_on_or_showed_the_error_on("payment_option", response, "/order/review/"):
        assert (wizard(at_payment)["network"], wizard(at_payment)["asset"]) == ("local", "ETH")


@FUZZ
@given(body=texts, session_lost=st.booleans())
def test_the_review_with_any_body_and_a_wizard_left_half_way_never_places_an_order(
    at_contact, body: str, session_lost: bool
):
    # Given a wizard left at the contact step, or a browser whose session was lost
    client = Client() if session_lost else at_contact

    # When "Place order" is posted with a body of any text
    response = client.post("/order/review/", body.encode("utf-8", "surrogatepass"), content_type="text/plain")
    tally("/order/review/ any body", response.status_code)

    # Then the customer is sent back to the first unfinished step (and nothing is stored: see the fixture)
    assert response.status_code == 302
    assert response["Location"] == ("/order/" if session_lost else "/order/contact/")


@pytest.fixture
def order_page(placed_order, client):
    path = placed_order["status_url"].split("//", 1)[1].split("/", 1)[1]
    return client, f"/{path}"


TX_HASH_EXAMPLES = ("0x" + "ab" * 32, "0X" + "AB" * 32, " 0x" + "0" * 64 + " ", "0x" + "g" * 64, "0x" + "a" * 63)


@FUZZ
@given(value=field_values(*TX_HASH_EXAMPLES))
def test_i_have_paid_with_any_transaction_hash_keeps_a_well_formed_one_or_says_what_is_wrong(
    order_page, value: str | None
):
    # Given the order's page
    client, path = order_page
    notices = Notice.objects.count()

    # When "I have paid" is posted with any text as the transaction hash
    response = post_form(client, f"{path}paid/", {"tx_hash": value})
    tally("/o/<reference>/<token>/paid/ tx_hash", response.status_code)

    # Then a well-formed hash (or none) is kept with the notice; anything else is refused on the field
    received = as_received(value or "").strip()
    if assert_moved_on_or_showed_the_error_on("tx_hash", response, path):
        assert received == "" or TX_HASH.match(received)
        assert Notice.objects.count() == notices + 1
        assert Notice.objects.latest("pk").tx_hash == received.lower()
    else:
        assert response.status_code == 400
        assert Notice.objects.count() == notices
    assert_not_echoed_raw(value or "", response)

"""Find my order is limited per client and per email address; the limit's answer says nothing about orders;
the page needs its CSRF token."""

from __future__ import annotations

import pytest
from django.core import mail
from django.core.cache import cache
from django.test import Client

from tests.api_answers import error_fields
from tests.placing import order_posted

LOOKUP_URL = "/api/v1/orders/lookup/"
FIND_URL = "/order/find/"


@pytest.fixture
def limits_on(settings):
    settings.RATELIMIT_ENABLE = True
    settings.RATELIMIT_LOOKUPS = 5
    settings.RATELIMIT_LOOKUPS_PER_EMAIL = 2
    settings.RATELIMIT_WINDOW_S = 600
    settings.RATELIMIT_LOOKUPS_EMAIL_WINDOW_S = 10**9  # its own window, far longer than the per-client one
    cache.clear()
    yield settings
    cache.clear()


def ask(email: str, ip: str):
    return Client(REMOTE_ADDR=ip).post(LOOKUP_URL, {"email": email}, content_type="application/json")


@pytest.mark.django_db
def test_one_address_asked_about_from_many_clients_is_limited_the_same_whether_or_not_it_ordered(limits_on, placed):
    # Given an address that ordered (the `placed` order's) and one that never did, each asked about twice
    for email in ("ada@example.org", "nobody@example.org"):
        assert [ask(email, f"10.0.0.{n}").status_code for n in (1, 2)] == [202, 202]

    # When a third client asks about each, in another case
    known, unknown = ask("ADA@example.org", "10.0.0.3"), ask("Nobody@example.org", "10.0.0.4")

    # Then both are refused alike, with a sentence and Retry-After
    assert known.status_code == unknown.status_code == 429
    assert error_fields(known, "rate_limited") == error_fields(unknown, "rate_limited")  # request_id differs
    assert "Too many requests" in error_fields(known)["detail"]
    assert int(known["Retry-After"]) > 600  # the address's window, not the client's
    # And the page says the same, in words
    page = Client(REMOTE_ADDR="10.0.0.5").post(FIND_URL, {"email": "ada@example.org"})
    assert page.status_code == 429 and b"Too many requests" in page.content


@pytest.mark.django_db
def test_one_client_asking_about_many_addresses_is_limited(limits_on):
    answers = [ask(f"person{n}@example.org", "10.0.0.9").status_code for n in range(6)]

    assert answers == [202] * 5 + [429]
    # the page shares the client's budget
    assert Client(REMOTE_ADDR="10.0.0.9").post(FIND_URL, {"email": "x@example.org"}).status_code == 429
    # another client is not affected
    assert ask("person0@example.org", "10.0.0.10").status_code == 202


@pytest.mark.django_db
def test_the_find_my_order_page_needs_its_csrf_token():
    client = Client(enforce_csrf_checks=True)
    page = client.get(FIND_URL).content.decode()
    token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]

    refused = client.post(FIND_URL, {"email": "ada@example.org"})
    accepted = client.post(FIND_URL, {"email": "ada@example.org", "csrfmiddlewaretoken": token})

    assert refused.status_code == 403
    assert accepted.status_code == 302


@pytest.mark.django_db
def test_look_alike_spellings_of_one_address_share_its_limit_and_are_refused(
    limits_on, anvil, make_node, order_payload, django_capture_on_commit_callbacks
):
    # Given an address that ordered, and a limit of 3 lookups per address
    limits_on.RATELIMIT_LOOKUPS_PER_EMAIL = 3
    make_node()
    victim = "kris@kiosk.example"
    order_posted(Client(), {**order_payload, "email": victim})
    mail.outbox.clear()

    # When strangers ask about it with i/ı, s/ſ, k/K swapped and in other ASCII cases, each from its own client
    spellings = [
        "kris@kiosk.example",
        "kr\u0131s@kiosk.example",
        "kri\u017f@kiosk.example",
        "kr\u0131\u017f@kiosk.example",
        "KRIS@kiosk.example",
        "\u212aris@kiosk.example",
        "kris@kio\u017fk.example",
        "Kris@KIOSK.example",
        "kris@kiosk.EXAMPLE",
    ]
    with django_capture_on_commit_callbacks(execute=True):
        answers = [ask(email, f"10.0.1.{n}").status_code for n, email in enumerate(spellings)]

    # Then the look-alikes are refused on the field, the ASCII spellings count as one address (the 4th is 429),
    # and the address receives 3 emails, not one per spelling
    assert answers == [202, 400, 400, 400, 202, 400, 400, 202, 429]
    assert [message.to for message in mail.outbox] == [[victim]] * 3

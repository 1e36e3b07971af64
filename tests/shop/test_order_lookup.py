"""Find my order: an email address gets one email listing its orders' private links; nobody learns whether an
address ever ordered, from the answer, its timing, or the rate limit."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from orders.orders import order_cancel
from shop.personal_data import order_personal_data_erase
from tests.api_answers import error_fields
from tests.shop.helpers import LOOKUP_URL

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]

FIND_URL = "/order/find/"
LINK = re.compile(r"https?://[^/\s]+(/o/[A-Z0-9-]+/[0-9a-f]+/)")


def main_of(response) -> bytes:
    return response.content.split(b"<main", 1)[1].split(b"</main>", 1)[0]


def links_in(message) -> list[str]:
    return LINK.findall(message.body)


def test_an_address_that_placed_orders_gets_one_email_listing_each_with_a_link_that_opens_it(orders, lookup):
    # Given two orders placed with one address (typed in two cases) and one placed by someone else
    first = orders(email="Ada@Example.org")
    second = orders(email="ada@example.org")
    orders(email="grace@example.org")

    # When the customer asks, in yet another case
    response = lookup("ADA@EXAMPLE.ORG")

    # Then one email goes to the address they ordered with, listing both orders and no other
    assert response.status_code == 202
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["ada@example.org"]  # the latest order's address, never the text typed in the form
    assert first.reference in message.body and second.reference in message.body
    assert "grace" not in message.body
    # And each link opens its order
    paths = links_in(message)
    assert len(paths) == 2
    assert [Client().get(path).status_code for path in paths] == [200, 200]
    html = message.alternatives[0][0]
    assert all(path in html for path in paths)


def test_an_address_with_orders_and_one_without_get_the_same_answer(orders, lookup):
    orders(email="ada@example.org")

    known = lookup("ada@example.org")
    unknown = lookup("nobody@example.org")

    assert (known.status_code, known.json()) == (unknown.status_code, unknown.json())
    assert known.status_code == 202
    # The lookup runs as a background job either way (here eagerly, once the answer was built); only the job
    # finds orders, or none.
    assert Job.objects.filter(kind=JobKind.ORDER_LOOKUP).count() == 2
    assert len(mail.outbox) == 1


def test_the_request_stores_only_a_job_and_reads_no_order(orders):
    orders(email="ada@example.org")
    with CaptureQueriesContext(connection) as known:
        Client().post(LOOKUP_URL, {"email": "ada@example.org"}, content_type="application/json")
    with CaptureQueriesContext(connection) as unknown:
        Client().post(LOOKUP_URL, {"email": "nobody@example.org"}, content_type="application/json")

    assert len(known.captured_queries) == len(unknown.captured_queries)
    assert not any("shop_order" in query["sql"] for query in known.captured_queries)


def test_the_page_shows_the_same_confirmation_whether_or_not_the_address_ordered(
    orders, django_capture_on_commit_callbacks
):
    orders(email="ada@example.org")
    client = Client()

    with django_capture_on_commit_callbacks(execute=True):
        known = client.post(FIND_URL, {"email": "ada@example.org"}, follow=True)
    with django_capture_on_commit_callbacks(execute=True):
        unknown = client.post(FIND_URL, {"email": "nobody@example.org"}, follow=True)

    assert known.redirect_chain == unknown.redirect_chain == [("/order/find/sent/", 302)]
    assert main_of(known) == main_of(unknown)  # the rest differs only by the CSRF token
    assert b"If orders were placed with this email address" in known.content
    assert b"ada@example.org" not in known.content  # the page never echoes the address
    assert len(mail.outbox) == 1


@pytest.mark.parametrize(
    ("language", "subject"),
    [("en", "Your B200 Pairs orders and their private links"), ("es", "Sus pedidos"), ("fr", "Vos commandes")],
)
def test_the_email_is_in_the_language_of_the_latest_order(orders, lookup, language, subject):
    orders(email="ada@example.org", language="fr" if language == "en" else "en")
    orders(email="ada@example.org", language=language)

    lookup("ada@example.org", HTTP_ACCEPT_LANGUAGE="de")

    assert mail.outbox[0].subject.startswith(subject)


def test_orders_whose_personal_data_was_erased_are_not_listed(orders, lookup):
    erased = orders(email="ada@example.org")
    order_cancel(order_id=erased.pk, actor="staff", reason="customer's request")
    order_personal_data_erase(order_id=erased.pk, actor="staff", reason="customer's request")
    kept = orders(email="ada@example.org")

    lookup("ada@example.org")

    assert len(mail.outbox) == 1
    assert kept.reference in mail.outbox[0].body and erased.reference not in mail.outbox[0].body


def test_an_address_whose_only_order_was_erased_gets_no_email(orders, lookup):
    erased = orders(email="ada@example.org")
    order_cancel(order_id=erased.pk, actor="staff", reason="customer's request")
    order_personal_data_erase(order_id=erased.pk, actor="staff", reason="customer's request")

    assert lookup("ada@example.org").status_code == 202
    assert mail.outbox == []


@pytest.mark.parametrize(
    "email",
    [
        "not-an-email",
        "ada@example.org\r\nBcc: victim@example.net",
        "ada@example.org\nSubject: hi",
        "ada@example.org,eve@example.net",
        "",
        "a" * 250 + "@example.org",
    ],
)
def test_a_malformed_email_is_refused_on_its_field_and_nothing_is_queued(lookup, email):
    api = lookup(email)
    page = Client().post(FIND_URL, {"email": email})

    assert api.status_code == 400 and list(error_fields(api, "invalid")) == ["email"]
    assert page.status_code == 400
    assert b'id="id_email_error"' in page.content
    assert not Job.objects.filter(kind=JobKind.ORDER_LOOKUP).exists()
    assert mail.outbox == []


def test_an_email_sent_as_a_number_is_refused_on_its_field(lookup):
    response = Client().post(LOOKUP_URL, {"email": 12}, content_type="application/json")
    assert response.status_code == 400 and list(error_fields(response, "invalid")) == ["email"]


def test_after_the_old_secret_key_is_retired_the_lookup_email_carries_a_fresh_link_that_opens_the_order(
    orders, lookup, settings
):
    # Given an order whose emailed link was made under a key that has since been rotated out entirely
    order = orders(email="ada@example.org")
    lookup("ada@example.org")
    [old_path] = links_in(mail.outbox[-1])
    settings.SECRET_KEY = "a-new-secret-key-after-rotation-0123456789-abcdefghijklmnop"  # noqa: S105
    settings.SECRET_KEY_FALLBACKS = []
    assert Client().get(old_path).status_code == 404

    # When the customer asks again
    lookup("ada@example.org")

    # Then the new email's link, made under the current key, opens the order
    [new_path] = links_in(mail.outbox[-1])
    assert new_path != old_path and order.reference in new_path
    assert Client().get(new_path).status_code == 200

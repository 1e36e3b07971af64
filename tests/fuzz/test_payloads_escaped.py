"""SQL, HTML and script typed into every text field: stored as typed, shown escaped wherever it is shown
(the order page, the wizard's review, the operator console, the admin's list and change pages, the email's
HTML part) and left plain in the email's text part."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.utils.html import escape

from orders.models import Order
from orders.payment_outcome import OrderPaymentOutcome, order_payment_outcome
from tests.fuzz.strategies import PUBLIC_KEY
from tests.placing import order_posted

pytestmark = [pytest.mark.django_db]

PAYLOADS = {
    "first_name": "<script>alert('first')</script>",
    "last_name": "Robert'); DROP TABLE shop_order;-- <b>bold</b>",
    "email": "o'brien+{{7*7}}@example.org",  # a valid address: ' { } are allowed before the @
    "hypothesis": '<img src=x onerror="alert(1)"> & 1=1; -- ',
}
KEY_COMMENT = "<svg onload=alert(1)>"


def escaped_not_raw(text: str, page: str, *, shown: bool = True) -> None:
    # A payload with markup must never reach a page as markup; where the page shows it, it shows it escaped.
    if "<" in text or "'" in text or '"' in text:
        assert text not in page
    if shown:
        assert escape(text) in page


@pytest.fixture
def placed_with_payloads(shop_with_lots, django_capture_on_commit_callbacks) -> dict:
    """An order placed through the API with a payload in every text field (the email sent on commit)."""
    body = {
        "lots": 1,
        "duration_days": 7,
        "preparation": "pytorch-blackwell",
        **PAYLOADS,
        "ssh_public_key": f"{PUBLIC_KEY} {KEY_COMMENT}",
        "network": "local",
        "asset": "ETH",
        "hypothesis_kind": "bigger_batch",
    }
    with django_capture_on_commit_callbacks(execute=True):
        return order_posted(Client(), body)


def test_the_payloads_are_stored_exactly_as_typed(placed_with_payloads):
    # Given an order placed with SQL and HTML in its text fields / When it is read from the database
    order = Order.objects.get(reference=placed_with_payloads["reference"])

    # Then every field holds what was typed (the SQL was data, never a statement: the table is still there)
    assert (order.first_name, order.last_name, order.email) == (
        PAYLOADS["first_name"],
        PAYLOADS["last_name"],
        PAYLOADS["email"],
    )
    assert order.hypothesis_text == PAYLOADS["hypothesis"].strip()
    assert order.ssh_public_key == f"{PUBLIC_KEY} {KEY_COMMENT}"


def test_the_order_page_and_the_api_never_return_the_payloads_as_markup(placed_with_payloads):
    # Given the order / When its page is opened with the secret link
    page = Client().get(placed_with_payloads["status_url"]).content.decode()

    # Then no payload appears as markup
    for text in (*PAYLOADS.values(), KEY_COMMENT):
        escaped_not_raw(text, page, shown=False)
    # And the API gives the hypothesis back as JSON text, the same characters
    assert placed_with_payloads["hypothesis"] == PAYLOADS["hypothesis"].strip()


def test_the_order_received_email_escapes_the_html_part_and_keeps_the_text_part_plain(placed_with_payloads):
    # Given the email sent when the order was placed
    email = mail.outbox[-1]
    html = email.alternatives[0][0]

    # Then the HTML part greets with the name escaped, the text part with the name as typed
    escaped_not_raw(PAYLOADS["first_name"], html)
    assert f"Hello {PAYLOADS['first_name']}," in email.body
    assert "&lt;" not in email.body and "&#x27;" not in email.body
    # And the address is the one typed
    assert email.to == [PAYLOADS["email"]]


def test_the_wizard_review_shows_the_payloads_escaped(shop_with_lots):
    # Given a customer who typed payloads in the contact step
    client = Client()
    client.post("/order/", {"lots": "1", "duration_days": "7", "preparation": "pytorch-blackwell", "continue": "1"})
    contact = {**PAYLOADS, "ssh_public_key": PUBLIC_KEY, "hypothesis_kind": "bigger_batch", "terms": "on"}
    assert client.post("/order/contact/", contact).status_code == 302
    assert client.post("/order/payment/", {"payment_option": "local:ETH"}).status_code == 302

    # When the review page is shown
    page = client.get("/order/review/").content.decode()

    # Then each payload is shown, escaped
    for field in ("first_name", "last_name", "email"):
        escaped_not_raw(PAYLOADS[field], page)
    escaped_not_raw(PAYLOADS["hypothesis"].strip(), page)


def test_the_operator_console_shows_the_hypothesis_escaped(placed_with_payloads):
    # Given the order is paid (so it waits for an operator), and an operator signed in
    order = Order.objects.get(reference=placed_with_payloads["reference"])
    with transaction.atomic():
        order_payment_outcome(order_id=order.pk, outcome=OrderPaymentOutcome.PAID, reason="paid in the test")
    call_command("add_staff", "olga", "--role", "operator", "--password", "a-long-operator-password")
    client = Client()
    client.force_login(get_user_model().objects.get(username="olga"))

    # When the console is opened
    response = client.get("/ops/")

    # Then the order is listed, its hypothesis escaped
    assert response.status_code == 200
    page = response.content.decode()
    assert order.reference in page
    escaped_not_raw(PAYLOADS["hypothesis"].strip(), page)


@pytest.fixture
def admin_client_(db) -> Client:
    get_user_model().objects.create_superuser("root", "root@example.org", "a-long-admin-password")
    client = Client()
    client.login(username="root", password="a-long-admin-password")
    return client


def test_the_admin_list_and_change_pages_show_the_payloads_escaped(placed_with_payloads, admin_client_):
    # Given a superuser / When the orders list and the order's change page are opened
    order = Order.objects.get(reference=placed_with_payloads["reference"])
    listing = admin_client_.get("/admin/orders/order/")
    change = admin_client_.get(f"/admin/orders/order/{order.pk}/change/")

    # Then both pages answer, and every payload they show is escaped
    assert (listing.status_code, change.status_code) == (200, 200)
    escaped_not_raw(PAYLOADS["email"], listing.content.decode())
    page = change.content.decode()
    for text in (*PAYLOADS.values(), KEY_COMMENT):
        escaped_not_raw(text.strip(), page)

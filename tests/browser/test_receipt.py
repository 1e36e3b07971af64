"""The receipt in a real browser (Chromium): a customer of a paid order opens it from the order page, in
each language; it is in their language, numbered, shows the transfer that paid it with times in their own time
zone, fits a phone (390×844: no sideways scroll, the Total column whole), and on paper (print media, and a PDF)
the site's header, language switcher and the links back are gone and no column is cut. Its language switcher
changes its language; after an applied extension it shows the grand total. Checked by axe-core and the Nu HTML
checker."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.browser.checks import PHONE, nu_clean
from tests.browser.conftest import order_placed, paid_on_the_chain, rental_started

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


HEADINGS = {"en": "Receipt for order {}", "es": "Recibo del pedido {}", "fr": "Reçu de la commande {}"}
GRAND_TOTALS = {"en": "Grand total", "es": "Total general", "fr": "Total général"}
# A4 less the print stylesheet's 15 mm margins, in CSS pixels (96 per inch): the width a printed page has.
A4_PRINTABLE_WIDTH = round((210 - 2 * 15) / 25.4 * 96)
# The right edge of the widest element of the page (0 for none) and the page's own scroll width.
WIDEST = """() => ({
  scrollWidth: document.documentElement.scrollWidth,
  right: Math.max(0, ...[...document.querySelectorAll('.receipt *')].map(el => el.getBoundingClientRect().right)),
})"""


def paid_order(shop, order_payload, language: str) -> tuple[dict, str]:
    """A USDC order placed through the API in `language` and paid in full, final; and the transfer's tx hash."""
    from payments.models import Credit, PaymentRequest

    placed = order_placed(shop, order_payload, language=language)
    payment = PaymentRequest.objects.get(order__reference=placed["reference"])
    paid_on_the_chain(shop, (payment, payment.amount))
    return placed, Credit.objects.get(payment=payment).tx_hash


def extended_order(shop, order_payload, language: str) -> dict:
    """A paid USDC order, handed over, then extended by 3 days paid in USDC: the extension applied."""
    from orders.models import Extension, ExtensionStatus

    placed, _ = paid_order(shop, order_payload, language)
    rental_started(placed["reference"])
    opened = Client().post(
        f"/api/v1/orders/{placed['reference']}/extend/",
        {"duration_days": 3},
        content_type="application/json",
        headers={"X-Order-Token": placed["access_token"]},
    )
    assert opened.status_code == 201, opened.content
    extension = Extension.objects.get(pk=opened.json()["id"])
    paid_on_the_chain(shop, extension.payment)
    assert Extension.objects.get(pk=extension.pk).status == ExtensionStatus.APPLIED
    return placed


def receipt_path(placed: dict) -> str:
    return "/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1] + "receipt/"


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_a_customer_opens_the_receipt_from_the_order_page_and_prints_it_without_the_sites_chrome(
    open_context, page_checks, shop, order_payload, language, tmp_path
):
    placed, tx_hash = paid_order(shop, order_payload, language)
    page = open_context(language).new_page()
    try:
        # Given the paid order's page
        page.goto("/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1])

        # When the customer follows its receipt link
        with page.expect_navigation():
            page.locator("#receipt-link").click()

        # Then the receipt is shown, in their language, numbered, with the transfer that paid it and its print
        # stylesheet
        assert page.locator("h1").inner_text() == HEADINGS[language].format(placed["reference"])
        assert page.locator(".receipt__number").inner_text() == f"R-{placed['reference']}"
        assert tx_hash in page.locator(".receipt").inner_text()
        assert page.locator('link[rel=stylesheet][media=print][href$="receipt-print.css"]').count() == 1
        # And its times are in the customer's own time zone (the server's UTC kept in the title)
        paid_time = page.locator(".review-list time").nth(1)
        assert paid_time.get_attribute("title").endswith(" UTC")
        assert paid_time.inner_text() != paid_time.get_attribute("title")
        page_checks(page, f"{language}-receipt-01")

        # And on a phone the page does not scroll sideways, and the Total column is there whole
        page.set_viewport_size(PHONE)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
        total = page.locator(".receipt__total").first
        assert total.is_visible()
        box = total.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
        assert "USD" in total.inner_text()

        # And on paper (an A4 page's width) the site's header, its language switcher and the link back to the
        # order are not printed, and no column is cut
        page.set_viewport_size({"width": A4_PRINTABLE_WIDTH, "height": 1000})
        page.emulate_media(media="print")
        assert not page.locator(".site-header").is_visible()
        assert not page.locator(".language-form").is_visible()
        assert not page.locator(".site-footer").is_visible()
        assert not page.locator(".receipt__actions").is_visible()
        assert page.locator(".receipt").is_visible()
        assert page.locator(".receipt__table thead").first.is_visible()  # the tables, not the phone's rows
        widest = page.evaluate(WIDEST)
        assert widest["scrollWidth"] <= A4_PRINTABLE_WIDTH and widest["right"] <= A4_PRINTABLE_WIDTH, widest
        # And "Save as PDF" makes an A4 PDF of the receipt
        pdf = page.pdf(format="A4", path=str(tmp_path / f"{language}-receipt.pdf"))
        assert pdf.startswith(b"%PDF-") and pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page ") >= 1
    except Exception:
        page_checks.failure(page, f"{language}-receipt-failure")
        raise
    assert not page_checks.axe_findings, page_checks.axe_findings


@pytest.mark.parametrize(("language", "other"), [("en", "fr"), ("fr", "es"), ("es", "en")])
def test_the_receipts_language_switcher_changes_its_language(
    open_context, page_checks, shop, order_payload, language, other
):
    # Given a receipt open in the customer's language
    placed, _ = paid_order(shop, order_payload, language)
    page = open_context(language).new_page()
    try:
        page.goto(receipt_path(placed))
        assert page.locator("html").get_attribute("lang") == language

        # When they choose another language in the switcher
        page.locator("#language-select").select_option(other)
        with page.expect_navigation():
            page.locator(".language-form button[type=submit]").click()

        # Then the receipt comes back in that language, and stays in it
        assert page.url.endswith(receipt_path(placed))
        assert page.locator("html").get_attribute("lang") == other
        assert page.locator("h1").inner_text() == HEADINGS[other].format(placed["reference"])
        page.reload()
        assert page.locator("h1").inner_text() == HEADINGS[other].format(placed["reference"])
        page_checks(page, f"{other}-receipt-02-switched")
    except Exception:
        page_checks.failure(page, f"{language}-receipt-switch-failure")
        raise
    assert not page_checks.axe_findings, page_checks.axe_findings


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_after_an_applied_extension_the_receipt_shows_the_grand_total(
    open_context, page_checks, shop, order_payload, language
):
    # Given a rental of 7 days (1,990 USD) paid in USDC and extended by 3 days (899 USD) paid in USDC
    placed = extended_order(shop, order_payload, language)
    page = open_context(language).new_page()
    try:
        # When the customer opens its receipt
        page.goto(receipt_path(placed))

        # Then it shows the extension and the grand total, in USDC and in USD, in their language's numbers
        total = page.locator(".receipt__grand-total")
        assert total.locator("h2").inner_text() == GRAND_TOTALS[language]
        usdc, usd = ("2,889", "2,889.00") if language == "en" else ("2\xa0889", "2\xa0889,00")
        assert f"{usdc} USDC" in total.inner_text()
        assert page.locator("#grand-total-usd").inner_text() == f"{usd} USD"
        page_checks(page, f"{language}-receipt-03-extended")

        # And on a phone the whole receipt fits, the grand total included
        page.set_viewport_size(PHONE)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
        box = page.locator("#grand-total-usd").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    except Exception:
        page_checks.failure(page, f"{language}-receipt-extended-failure")
        raise
    assert not page_checks.axe_findings, page_checks.axe_findings
    nu_clean(page_checks, "the test")

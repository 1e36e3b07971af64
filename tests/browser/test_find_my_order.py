"""Find my order in a real browser (Chromium), in English, Spanish and French: a customer who lost their link
follows the footer's link, gives their email (a malformed one first, refused on the field), reads the same
confirmation as anyone would, and the email the outbox sent them carries a link that opens their order. The
pages are checked by axe-core and the Nu HTML checker."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.utils import translation
from django.utils.translation import gettext

from tests.browser.checks import nu_clean
from tests.browser.conftest import order_placed

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

LANGUAGES = ["en", "es", "fr"]
LINK = re.compile(r"https?://[^/\s]+(/o/[A-Z0-9-]+/[0-9a-f]+/)")


def translated(language: str, message: str) -> str:
    with translation.override(language):
        return gettext(message)


def place(shop, order_payload, language: str) -> str:
    """An order placed through the API in `language`, with an address of that customer's own; its reference."""
    from provisioning.models import Node

    Node.objects.create(name=f"lookup-node-{language}", driver="local", host="127.0.0.1")
    placed = order_placed(shop, order_payload, language=language, email=f"Customer.{language}@example.org")
    return placed["reference"]


def test_a_customer_finds_their_order_by_email_in_each_language(open_context, page_checks, shop, order_payload):
    references = {language: place(shop, order_payload, language) for language in LANGUAGES}
    mail.outbox.clear()  # the "order received" emails
    for language in LANGUAGES:
        page = open_context(language).new_page()
        try:
            # Given a customer on the home page who lost the link to their order
            page.goto("/")
            page.locator("footer a[href='/order/find/']").click()
            page.wait_for_url("**/order/find/")
            assert translated(language, "Find my order") in page.locator("h1").inner_text()
            page_checks(page, f"{language}-find-01-form")

            # When they type a malformed address, it is refused on the field, in their language
            page.locator("#id_email").fill("customer at example.org")
            with page.expect_navigation():
                page.locator("main form button[type=submit]").click()
            assert page.locator("#id_email").get_attribute("aria-invalid") == "true"
            assert page.locator("#id_email_error").inner_text().strip()
            page_checks(page, f"{language}-find-02-refused")

            # And when they give their address (in other letter case), the page confirms without saying more
            page.locator("#id_email").fill(f"customer.{language.upper()}@EXAMPLE.org")
            with page.expect_navigation():
                page.locator("main form button[type=submit]").click()
            assert page.url.endswith("/order/find/sent/")
            confirmation = translated(
                language,
                "If orders were placed with this email address, an email listing them with their private links is on "
                "its way. It can take a few minutes; check your spam folder too.",
            )
            assert page.locator("main [role=status]").inner_text().strip() == confirmation
            page_checks(page, f"{language}-find-03-sent")

            # Then one email, in their language, went to the address they ordered with
            message = mail.outbox[-1]
            assert message.to == [f"Customer.{language}@example.org"]
            assert message.subject == translated(language, "Your B200 Pairs orders and their private links")
            [path] = LINK.findall(message.body)

            # And its link opens their order
            page.goto(path)
            assert references[language] in page.locator("main").inner_text()
        except Exception:
            page_checks.failure(page, f"{language}-find-failure")
            raise
    assert len(mail.outbox) == 3
    assert not page_checks.axe_findings, page_checks.axe_findings
    nu_clean(page_checks, "the test")

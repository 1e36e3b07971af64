"""Replacing the SSH key from the order page in a real browser (Chromium), in English, Spanish and French, at 1280
px and on a 390 px phone: a key with options is refused with the message on the field, a new key is saved with a
success message. The pages are checked by axe-core and the Nu HTML checker."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.utils import translation
from django.utils.translation import gettext

from tests.browser.checks import nu_clean
from tests.browser.conftest import order_placed

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def a_new_key() -> str:
    line = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return line.decode() + " ada@new-laptop"


OPTIONS_REFUSED = 'Paste the key alone: options before it, such as command="..." or from="...", are not accepted.'


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_a_customer_replaces_the_key_from_the_order_page(open_context, page_checks, shop, order_payload, language):
    from orders.models import Order

    placed = order_placed(shop, order_payload, asset="ETH")
    page = open_context(language).new_page()
    try:
        # Given the customer's order page, with its "Replace SSH key" form
        page.goto("/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1])
        form = page.locator("form.ssh-key-form")
        form.wait_for()

        # When they paste a key with a forced command in front of it
        form.locator("#id_ssh_public_key").fill('command="/bin/sh" ' + a_new_key())
        with page.expect_navigation():
            form.locator("button[type=submit]").click()

        # Then the message sits on the field, and nothing changed
        error = page.locator("#id_ssh_public_key_error")
        error.wait_for()
        with translation.override(language):
            alone = gettext(OPTIONS_REFUSED)
        assert alone in error.inner_text()
        assert page.locator("#id_ssh_public_key").get_attribute("aria-invalid") == "true"
        page_checks(page, f"{language}-key-01-refused")

        # When they paste a new plain key
        key = a_new_key()
        page.locator("#id_ssh_public_key").fill(key)
        with page.expect_navigation():
            page.locator("form.ssh-key-form button[type=submit]").click()

        # Then the page says it is saved, and shows the new key in use
        order = Order.objects.get(reference=placed["reference"])
        assert order.ssh_public_key == key
        with translation.override(language):
            saved = gettext("Your new SSH key is saved: access will use it.")
        page.get_by_text(saved).wait_for()
        assert page.locator("#ssh-key-fingerprint").inner_text() == order.ssh_key_fingerprint
        page_checks(page, f"{language}-key-02-saved")
    except Exception:
        page_checks.failure(page, f"{language}-key-failure")
        raise
    assert not page_checks.axe_findings, page_checks.axe_findings
    nu_clean(page_checks, "the test")

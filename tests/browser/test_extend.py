"""Extending an active rental in a real browser (Chromium), in English, Spanish and French: the order page's
"Extend" form opens an extension with its own payment panel, the customer pays it and presses "I have paid",
and once the transfer is final the page shows the new end. The pages are checked by axe-core and the Nu HTML checker."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command

from tests.browser.checks import nu_clean
from tests.browser.conftest import order_placed, paid_on_the_chain, rental_started

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def active_order(shop, order_payload) -> dict:
    """A USDC order placed through the API, paid on the local chain, and handed over (its rental running)."""
    from payments.models import PaymentRequest

    placed = order_placed(shop, order_payload)
    payment = PaymentRequest.objects.get(order__reference=placed["reference"], extension=None)
    paid_on_the_chain(shop, payment)
    rental_started(placed["reference"])
    return placed


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_a_customer_extends_an_active_rental_from_the_order_page_and_pays_it(
    open_context, page_checks, shop, order_payload, language
):
    from orders.models import Extension, Order
    from payments.devnet import devnet_pay
    from payments.networks import rpc_client

    placed = active_order(shop, order_payload)
    ends_before = Order.objects.get(reference=placed["reference"]).ends_at
    page = open_context(language).new_page()
    try:
        # Given the customer's page of an active rental, with its "Extend" form
        page.goto("/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1])
        form = page.locator("form.extend-form")
        form.wait_for()
        page_checks(page, f"{language}-extend-01-form")

        # When they ask for 3 more days in USDC
        form.locator("input[name=duration_days][value='3']").check()
        form.locator("select[name=payment_option]").select_option("local:USDC")
        with page.expect_navigation():
            form.locator("button[type=submit]").click()

        # Then the page shows the extension's own payment panel: a new address, the exact amount
        extension = Extension.objects.get()
        payment = extension.payment
        panel = page.locator(f"#extension-{extension.pk}")
        panel.wait_for()
        card = page.locator(f"#ext-{extension.pk}-card")
        assert card.locator("[data-copy-value]").evaluate_all("els => els.map(e => e.dataset.copyValue)")[:2] == [
            str(payment.amount),
            payment.address,
        ]
        assert page.locator(f"#ext-{extension.pk}-address").inner_text().replace("\n", "") == payment.address
        # One open quote at a time: no second extension is offered while this one waits for its payment
        assert page.locator("form.extend-form").count() == 0
        assert card.locator("[data-countdown-to]").count() == 1
        assert payment.address != placed["payment"]["address"]
        page_checks(page, f"{language}-extend-02-payment")

        # When they pay it and press "I have paid" with the hash
        tx_hash = devnet_pay(client=rpc_client(payment.asset.network), payment=payment)
        page.locator("form.paid-form summary").click()  # the hash is optional: folded under the button
        page.locator("#id_tx_hash").fill(tx_hash)
        with page.expect_navigation():
            page.locator(".paid-button").click()
        shop.anvil.mine(2)
        call_command("scan_payments")

        # Then, with no reload by the customer (the page follows its open extension: before, it stopped polling
        # once the rental ran and kept inviting a second payment), the extension is applied, its card gone, and
        # the rental ends 3 days later
        panel.locator(".status--applied").wait_for(timeout=30_000)
        assert card.count() == 0 and page.locator(".paid-button").count() == 0
        assert Order.objects.get(reference=placed["reference"]).ends_at == ends_before + dt.timedelta(days=3)
        page_checks(page, f"{language}-extend-03-applied")
    except Exception:
        page_checks.failure(page, f"{language}-extend-failure")
        raise
    assert not page_checks.axe_findings, page_checks.axe_findings
    nu_clean(page_checks, "the test")

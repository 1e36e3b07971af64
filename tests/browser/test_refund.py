"""A refund in real browsers (Chromium): the customer of an overpaid order gives the refund address on the
order page (a refused one first, its reason on the field, in French), a payment reviewer approves it in the
admin, and a treasurer finds the movement in the ledger page. The customer's pages are checked by axe-core and
the Nu HTML checker."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import call_command

from tests.browser.checks import nu_clean
from tests.browser.conftest import order_placed, paid_on_the_chain

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

CUSTOMER_WALLET = "0x52908400098527886E0F7030069857D2E4169EE7"
PASSWORDS = {"rita": "a-long-reviewer-password", "tom": "a-long-treasurer-password"}


def overpaid_order(shop, order_payload) -> tuple[dict, object]:
    """A USDC order placed through the API and paid 2.5 USDC too much, final: its refund is open."""
    from payments.models import PaymentRequest, Refund

    placed = order_placed(shop, order_payload, language="fr")
    payment = PaymentRequest.objects.get(order__reference=placed["reference"])
    paid_on_the_chain(shop, (payment, payment.amount + Decimal("2.5")))
    return placed, Refund.objects.get(payment=payment)


def log_in(page, username: str, next_url: str) -> None:
    page.goto(f"/admin/login/?next={next_url}")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORDS[username])
    page.locator("#login-form [type=submit]").click()
    page.wait_for_url(f"**{next_url}")


def test_a_customer_gives_a_refund_address_a_reviewer_approves_it_and_a_treasurer_sees_it_in_the_ledger(
    open_context, page_checks, shop, order_payload
):
    from payments.models import Credit, Refund

    call_command("add_staff", "rita", "--role", "reviewer", "--password", PASSWORDS["rita"])
    call_command("add_staff", "tom", "--role", "treasurer", "--password", PASSWORDS["tom"])
    placed, refund = overpaid_order(shop, order_payload)
    page = open_context("fr").new_page()
    staff = open_context().new_page()
    try:
        # Given the customer's order page, with its refund waiting for an address
        page.goto(placed["status_url"].split("://", 1)[1].split("/", 1)[1].join(["/", ""]))
        field = page.locator(f"#refund-address-{refund.pk}")
        field.wait_for()
        page_checks(page, "fr-refund-01-due")

        # When they give the zero address, the page says why on the field, in French, and keeps what they typed
        field.fill("0x" + "0" * 40)
        with page.expect_navigation():
            page.locator(f"#refund-{refund.pk} button[type=submit]").click()
        error = page.locator(f"#refund-address-error-{refund.pk}")
        assert "L'adresse zéro détruit ce qu'on lui envoie" in error.inner_text()
        assert page.locator(f"#refund-address-{refund.pk}").get_attribute("aria-invalid") == "true"
        page_checks(page, "fr-refund-02-refused")

        # And when they give their own wallet's address, it waits for a reviewer
        page.locator(f"#refund-address-{refund.pk}").fill(CUSTOMER_WALLET)
        with page.expect_navigation():
            page.locator(f"#refund-{refund.pk} button[type=submit]").click()
        assert "En attente de l'approbation d'un vérificateur" in page.locator(f"#refund-{refund.pk}").inner_text()
        page_checks(page, "fr-refund-03-pending")

        # Then a payment reviewer approves it in the admin, with a reason
        log_in(staff, "rita", "/admin/payments/refund/")
        staff.locator(f"input[name=_selected_action][value='{refund.pk}']").check()
        staff.locator("select[name=action]").select_option("approve")
        staff.locator("button[name=index], input[name=index]").first.click()
        staff.locator("#id_reason").fill("the excess is on the explorer")
        with staff.expect_navigation():
            staff.locator("input[type=submit][value='Approve refund']").click()
        assert f"Refund {refund.pk}: approve refund recorded" in staff.locator(".messagelist").inner_text()
        assert Refund.objects.get(pk=refund.pk).status == "approved"
        page.reload()
        assert "Approuvé : il sera envoyé" in page.locator(f"#refund-{refund.pk}").inner_text()

        # And a treasurer finds the order's transfer in the ledger
        staff.context.clear_cookies()
        log_in(staff, "tom", "/admin/ledger/")
        credit = Credit.objects.get(payment__order__reference=placed["reference"])
        assert credit.tx_hash in staff.locator("#ledger").inner_text()
    except Exception:
        page_checks.failure(page, "fr-refund-failure")
        page_checks.failure(staff, "fr-refund-failure-staff")
        raise
    assert not page_checks.axe_findings, page_checks.axe_findings
    nu_clean(page_checks, "the test")

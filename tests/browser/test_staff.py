"""Each staff role in a real browser (Chromium), in English, Spanish and French, on a shop seeded through the real
code paths (orders placed through the API, paid on the local anvil chain, found by the scan): late payments in
review, a refund to approve, a refund approved for the treasurer's signer, and a paid order for the operators.

- The payment reviewer: the admin's start page with the queue and its counts, the payment's own page with the
  evidence beside Accept and Reject (one decision per language), the "needs review" list, the refund to approve,
  the operator console (a page that says where to go), the ledger.
- The operator: the console (their needs-attention items, what waits on others counted; it fits a phone), a
  reviewer's page opened anyway (the refusal names who acts), their queue on the admin's start page, log out.
- The treasurer: the start page (their queue, the ledger's link), the ledger with its totals (it fits 1280 px),
  filtered, and its CSV with the from and to addresses.

Each step is screenshotted and checked by axe-core (tests/browser/checks.py: at 1280 px, at 390×844 and in dark
mode); the module's last two tests report axe-core's and the Nu HTML checker's findings over every page."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone, translation
from django.utils.translation import pgettext

from tests.browser.checks import PHONE, VIEWPORT, axe_clean, nu_clean

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

LANGUAGES = ["en", "es", "fr"]
PASSWORDS = {"rita": "a-long-reviewer-password", "tom": "a-long-treasurer-password"}
CUSTOMER_WALLET = "0x52908400098527886E0F7030069857D2E4169EE7"
DECISIONS = {"en": "accept", "es": "reject", "fr": "accept"}  # the reviewer's decision on each language's payment


def translated(language: str, message: str) -> str:
    """A staff page's words in `language` (their translations carry the context "staff")."""
    with translation.override(language):
        return pgettext("staff", message)


class World:
    """What the seed made: each language's late payment, the refunds, the operator's paid order."""

    def __init__(self) -> None:
        self.late: dict[str, object] = {}  # language -> its late PaymentRequest
        self.refund_pending = None
        self.refund_approved = None
        self.paid = None


def place(shop, order_payload, language: str) -> tuple[dict, object]:
    """An order for one lot in USDC, placed through the API: (its 201 body, its payment request)."""
    from payments.models import PaymentRequest

    body = {**order_payload, "asset": "USDC", "ssh_public_key": shop.customer_public_key, "language": language}
    answer = Client().post("/api/v1/orders/", body, content_type="application/json")
    assert answer.status_code == 201, answer.content
    placed = answer.json()
    return placed, PaymentRequest.objects.get(order__reference=placed["reference"])


def seed(shop, order_payload) -> World:
    """Three late payments in full (one per language), two overpaid orders (one refund waiting for a reviewer,
    one approved for the signer) and an order paid exactly, all sent on the chain and found by one scan."""
    from payments.devnet import devnet_pay
    from payments.models import PaymentRequest, Refund
    from payments.networks import rpc_client
    from payments.refunds import refund_decide
    from provisioning.models import Node

    for number in range(6):  # a lot each, beside the shop's own node
        Node.objects.create(name=f"staff-node-{number}", driver="local", host="127.0.0.1", gpu_count=2)
    world = World()
    sent = []
    for language in LANGUAGES:
        _placed, payment = place(shop, order_payload, language)
        PaymentRequest.objects.filter(pk=payment.pk).update(expires_at=timezone.now() - dt.timedelta(minutes=5))
        world.late[language] = payment
        sent.append((payment, None))
    overpaid = [place(shop, order_payload, "en") for _ in range(2)]
    sent += [(payment, payment.amount + Decimal("2.5")) for _placed, payment in overpaid]
    paid_body, world.paid = place(shop, order_payload, "en")
    sent.append((world.paid, None))
    client = rpc_client(world.paid.asset.network)
    for payment, amount in sent:
        devnet_pay(client=client, payment=payment, amount=amount)
    shop.anvil.mine(2)
    call_command("scan_payments")
    # The customers give their refund address on the order page (the API); a reviewer approved one of them
    refunds = []
    for placed, payment in overpaid:
        refund = Refund.objects.get(payment=payment)
        given = Client().post(
            f"/api/v1/orders/{placed['reference']}/refunds/{refund.pk}/address/",
            {"address": CUSTOMER_WALLET},
            content_type="application/json",
            headers={"X-Order-Token": placed["access_token"]},
        )
        assert given.status_code == 200, given.content
        refunds.append(refund)
    world.refund_pending, world.refund_approved = refunds
    refund_decide(
        refund_id=world.refund_approved.pk,
        approve=True,
        reviewer="ana",
        reason="the excess is on the explorer",
        to_address=CUSTOMER_WALLET,
    )
    for payment in world.late.values():
        payment.refresh_from_db()
        assert (payment.status, payment.order.status) == ("late", "needs_review"), payment
    world.paid.refresh_from_db()
    assert world.paid.order.status == "paid"
    return world


@pytest.fixture
def world(shop, order_payload) -> World:
    call_command("add_staff", "rita", "--role", "reviewer", "--password", PASSWORDS["rita"])
    call_command("add_staff", "tom", "--role", "treasurer", "--password", PASSWORDS["tom"])
    return seed(shop, order_payload)


def log_in(page, check, name: str, username: str, password: str, next_url: str) -> None:
    page.goto(f"/admin/login/?next={next_url}")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(password)
    check(page, name)
    page.locator("#login-form [type=submit]").click()
    page.wait_for_url(f"**{next_url}")


def queue_count(page, kind: str) -> int:
    return int(page.locator(f"#staff-queue [data-kind={kind}] .staff-count").inner_text())


def fits(page, width: int) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth") <= width


def fits_a_phone(page) -> bool:
    """The page at 390×844 scrolls only down (the viewport is put back as it was)."""
    page.set_viewport_size(PHONE)
    try:
        return fits(page, PHONE["width"])
    finally:
        page.set_viewport_size(VIEWPORT)


def usdc(payment) -> str:
    from core.amounts import units_text

    return units_text(payment.amount_base_units, payment.decimals, "USDC")


def test_a_payment_reviewer_works_through_the_queue_in_each_language(open_context, page_checks, world):
    from payments.models import PaymentRequest

    for done, language in enumerate(LANGUAGES):
        page = open_context(language).new_page()
        step = f"{language}-staff-reviewer"
        payment = world.late[language]
        try:
            # Given the admin's start page, in the reviewer's language, with the queue first
            log_in(page, page_checks, f"{step}-01-login", "rita", PASSWORDS["rita"], "/admin/")
            assert page.locator("html").get_attribute("lang") == language
            assert queue_count(page, "review") == len(LANGUAGES) - done  # one decided per language before
            assert queue_count(page, "refund") == 1 and queue_count(page, "extension_review") == 0
            assert page.locator("#staff-queue a[href='/admin/ledger/']").count() == 1
            page_checks(page, f"{step}-02-start")

            # When they open this language's late payment from the queue
            page.locator("#staff-queue [data-kind=review] a", has_text=payment.order.reference).click()
            page.wait_for_url(f"**/admin/payments/paymentrequest/{payment.pk}/change/")

            # Then its page shows what arrived, in units with the symbol, beside Accept and Reject
            evidence = page.locator("#review-decision")
            assert evidence.locator("strong", has_text=usdc(payment)).count() == 1
            assert payment.credits.get().tx_hash in evidence.inner_text()
            decide = evidence.locator(f"button[name=decision][value={DECISIONS[language]}]")
            assert evidence.locator("button[name=decision]").count() == 2
            page_checks(page, f"{step}-03-payment")

            # When they decide, with a reason
            page.locator("#review-reason").fill("the transfer is on the explorer, five minutes late")
            with page.expect_navigation():
                decide.click()

            # Then the decision is made and the page says so, offering no other
            expected = {"accept": ("confirmed", "paid"), "reject": ("rejected", "cancelled")}[DECISIONS[language]]
            decided = PaymentRequest.objects.select_related("order").get(pk=payment.pk)
            assert (decided.status, decided.order.status) == expected
            assert page.locator(".messagelist .success").count() == 1
            assert page.locator("button[name=decision]").count() == 0
            page_checks(page, f"{step}-04-decided")

            # And the "needs review" list holds the payments still waiting
            page.goto("/admin/payments/paymentrequest/?review=waiting")
            assert page.locator("#result_list tbody tr").count() == len(LANGUAGES) - done - 1
            page_checks(page, f"{step}-05-needs-review")

            # And the refund to approve opens from the queue
            page.goto("/admin/")
            refund = world.refund_pending
            page.locator("#staff-queue [data-kind=refund] a", has_text=refund.payment.order.reference).click()
            page.wait_for_url(f"**/admin/payments/refund/{world.refund_pending.pk}/change/")
            assert "2.50 USDC" in page.locator("#content-main").inner_text()
            page_checks(page, f"{step}-06-refund")

            # And the operator console is not theirs: the page names who works there and where their own work is
            response = page.goto("/ops/")
            assert response.status == 403
            assert "Operators" in page.locator("main").inner_text()
            assert page.locator("main a[href='/admin/']").count() == 1
            page_checks(page, f"{step}-07-ops")

            # And the ledger is theirs to read
            page.goto("/admin/ledger/")
            assert page.locator("#ledger tbody tr").count() >= 6
            page_checks(page, f"{step}-08-ledger")
        except Exception:
            page_checks.failure(page, f"{step}-failure")
            raise
        finally:
            page.context.close()


def test_an_operator_sees_what_their_role_can_act_on_in_each_language(open_context, page_checks, shop, world):
    for language in LANGUAGES:
        page = open_context(language).new_page()
        step = f"{language}-staff-operator"
        reference = world.paid.order.reference
        try:
            # Given the console, in the operator's language
            log_in(page, page_checks, f"{step}-01-login", shop.operator, shop.operator_password, "/ops/")
            assert page.locator("html").get_attribute("lang") == language

            # Then "Needs attention" lists what operators act on (the paid order), each with a link that works,
            # and counts what waits on the reviewers (three late payments, a refund) without linking it
            attention = page.locator("#needs-attention")
            assert attention.locator("tr[data-kind=paid] code", has_text=reference).count() == 1
            assert attention.locator("tr[data-kind=review], tr[data-kind=refund]").count() == 0
            assert "Payment reviewers" in page.locator(".staff-others").inner_text()
            for link in attention.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))"):
                assert page.request.get(link).status == 200, link
            assert page.locator("section[aria-labelledby=waiting-title] code", has_text=reference).count() == 1
            assert page.get_by_role("button", name=translated(language, "Restart what is stuck")).count() == 0
            # And it fits a phone: nothing scrolls sideways at 390 px
            assert fits_a_phone(page), "the console scrolls sideways on a phone"
            page_checks(page, f"{step}-02-ops")

            # When they open a payment in review anyway (a link in an email, a bookmark)
            response = page.goto(f"/admin/payments/paymentrequest/{world.late[language].pk}/change/")

            # Then the refusal names who can act there, and links their own work
            assert response.status == 403
            assert "Payment reviewers" in page.locator("main").inner_text()
            assert page.locator("main a[href='/ops/']").count() == 1
            page_checks(page, f"{step}-03-refused")

            # And the admin's start page shows their own queue
            page.goto("/admin/")
            assert queue_count(page, "paid") == 3  # the two overpaid orders are paid too
            assert page.locator("#staff-queue [data-kind=review]").count() == 0
            page_checks(page, f"{step}-04-start")

            # And the console's "Log out" signs them out
            page.goto("/ops/")
            with page.expect_navigation():
                page.locator(".staff-bar__logout button").click()
            assert page.goto("/ops/").url.split("?")[0].endswith("/admin/login/")  # back to the login
            page_checks(page, f"{step}-05-logged-out")
        except Exception:
            page_checks.failure(page, f"{step}-failure")
            raise
        finally:
            page.context.close()


def test_a_treasurer_reads_the_ledger_with_its_totals_in_each_language(open_context, page_checks, world):
    for language in LANGUAGES:
        page = open_context(language).new_page()
        step = f"{language}-staff-treasurer"
        try:
            # Given the admin's start page: the approved refund waits for the signer, and the ledger is linked
            log_in(page, page_checks, f"{step}-01-login", "tom", PASSWORDS["tom"], "/admin/")
            assert queue_count(page, "refund_to_pay") == 1
            page_checks(page, f"{step}-02-start")

            # When they open the ledger
            page.locator("#staff-queue a[href='/admin/ledger/']").click()
            page.wait_for_url("**/admin/ledger/")

            # Then every movement is there, the totals per asset and kind above them, and it fits 1280 px
            assert page.locator("#ledger tbody tr").count() == 6
            totals = page.locator("#ledger-totals tbody tr")
            assert totals.first.locator("td").all_inner_texts()[:4] == ["local", "USDC", "credit", "6"]
            assert fits(page, VIEWPORT["width"]), "the ledger scrolls sideways at 1280 px"
            page_checks(page, f"{step}-03-ledger")

            # When they filter one kind of movement
            page.locator("select[name=kind]").select_option("credit")
            with page.expect_navigation():
                page.locator(".ledger-filters [type=submit]").click()
            assert page.locator("#ledger-totals tbody tr").count() == 1
            page_checks(page, f"{step}-04-ledger-filtered")

            # Then the CSV of the same rows names each movement's from and to addresses
            csv_link = page.locator(".ledger-filters a", has_text=translated(language, "Download as CSV"))
            answer = page.request.get(csv_link.get_attribute("href"))
            rows = list(csv.DictReader(io.StringIO(answer.text())))
            assert len(rows) == 6 and all(row["from_address"] and row["to_address"] for row in rows)
            deposits = {payment.address.lower() for payment in world.late.values()} | {world.paid.address.lower()}
            assert deposits <= {row["to_address"].lower() for row in rows}

            # And the console is not theirs: the page says where their own work is
            response = page.goto("/ops/")
            assert response.status == 403 and page.locator("main a[href='/admin/ledger/']").count() == 1
            page_checks(page, f"{step}-05-ops")
        except Exception:
            page_checks.failure(page, f"{step}-failure")
            raise
        finally:
            page.context.close()


def test_axe_core_finds_no_serious_or_critical_violation_on_any_page(page_checks):
    """axe-core ran on every page of the walks above as it was shown; this reports what it found."""
    axe_clean(page_checks, "the staff walks")


def test_the_nu_html_checker_finds_no_error_in_the_rendered_pages(page_checks):
    """The Nu HTML checker over the HTML of every page the walks above rendered, in one run."""
    nu_clean(page_checks, "the staff walks")

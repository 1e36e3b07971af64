"""Each staff role in a real browser (Chromium), in English, Spanish and French, on a shop seeded through the real
code paths (orders placed through the API, paid on the local anvil chain, found by the scan): late payments in
review, a refund to approve, a refund approved for the treasurer's signer, and a paid order for the operators.

The operators also have a preparation running on the console (its run at the GPU preflight) and three nodes out of
sale, one with a long reason: five items need their attention.

- The payment reviewer: the admin's start page with the queue and its counts, the payment's own page with the
  evidence beside Accept and Reject (one decision per language), the "needs review" list, the refund to approve,
  the operator console (a page that says where to go), the ledger.
- The operator: the console (their needs-attention items, what waits on others counted; it fits a phone, the first
  "Prepare" in the phone's first screen; no word broken inside a link at 1280 px; it follows the preparation without
  reloading itself), the running preparation's page, a reviewer's page opened anyway (the refusal names who acts),
  their queue on the admin's start page, log out.
- The treasurer: the start page (their queue, the ledger's link), the ledger with its totals (it fits 1280 px, and
  on a phone every amount is whole with its asset), filtered, and its CSV with the from and to addresses.

Each step is screenshotted and checked by axe-core (tests/browser/checks.py: at 1280 px, at 390×844 and in dark
mode), and in Spanish and French no English is left on it (tests/browser/staff_pages.py); the module's last two
tests report axe-core's and the Nu HTML checker's findings over every page."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.core.management import call_command
from django.utils import translation
from django.utils.translation import pgettext

from tests.browser.checks import PHONE, VIEWPORT, axe_clean, nu_clean
from tests.browser.staff_pages import AMOUNT_CELLS, LINK_WORDS_BROKEN, PLACE, EnglishLeft
from tests.browser.staff_world import LANGUAGES, NODES_OUT, REASONS, World, as_written, seed

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

PASSWORDS = {"rita": "a-long-reviewer-password", "tom": "a-long-treasurer-password"}
DECISIONS = {"en": "accept", "es": "reject", "fr": "accept"}  # the reviewer's decision on each language's payment
AMOUNT = re.compile(r"-?\d+([.,]\d+)? [A-Z]{2,}")  # a whole number and its asset: "1990.00 USDC", "1990,00 USD"


def translated(language: str, message: str) -> str:
    """A staff page's words in `language` (their translations carry the context "staff")."""
    with translation.override(language):
        return pgettext("staff", message)


@pytest.fixture
def world(shop, order_payload, settings) -> World:
    # The seeded run has no worker: it would be "stuck" two minutes in, and the console would offer a restart.
    settings.PREPARATION_STUCK_AFTER_SECONDS = 3600
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


def checked_in_words(page_checks, english: EnglishLeft):
    """page_checks, then the English left on the page (in Spanish and French)."""

    def check(page, name: str) -> None:
        page_checks(page, name)
        english.check(page, name)

    return check


def no_english_left(english: dict[str, EnglishLeft]) -> None:
    report = "\n".join(left.report() for left in english.values() if left.found)
    assert not report, f"English left on Spanish and French staff pages:\n{report}"


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


def on_a_phone(page, script: str, arg):
    """`script` evaluated on the page laid out at 390×844, scrolled to its top (the viewport is put back)."""
    page.set_viewport_size(PHONE)
    try:
        page.evaluate("() => scrollTo(0, 0)")
        return page.evaluate(script, arg)
    finally:
        page.set_viewport_size(VIEWPORT)


def usdc(payment) -> str:
    from core.amounts import units_text

    return units_text(payment.amount_base_units, payment.decimals, "USDC")


def test_a_payment_reviewer_works_through_the_queue_in_each_language(open_context, page_checks, world, order_payload):
    from payments.models import PaymentRequest

    english = {language: EnglishLeft(language, as_written(order_payload)) for language in LANGUAGES}
    for done, language in enumerate(LANGUAGES):
        page = open_context(language).new_page()
        step = f"{language}-staff-reviewer"
        payment = world.late[language]
        check = checked_in_words(page_checks, english[language])
        try:
            # Given the admin's start page, in the reviewer's language, with the queue first
            log_in(page, check, f"{step}-01-login", "rita", PASSWORDS["rita"], "/admin/")
            assert page.locator("html").get_attribute("lang") == language
            assert queue_count(page, "review") == len(LANGUAGES) - done  # one decided per language before
            assert queue_count(page, "refund") == 1 and queue_count(page, "extension_review") == 0
            assert page.locator("#staff-queue a[href='/admin/ledger/']").count() == 1
            check(page, f"{step}-02-start")

            # When they open this language's late payment from the queue
            page.locator("#staff-queue [data-kind=review] a", has_text=payment.order.reference).click()
            page.wait_for_url(f"**/admin/payments/paymentrequest/{payment.pk}/change/")

            # Then its page shows what arrived, in units with the symbol, beside Accept and Reject
            evidence = page.locator("#review-decision")
            assert evidence.locator("strong", has_text=usdc(payment)).count() == 1
            assert payment.credits.get().tx_hash in evidence.inner_text()
            decide = evidence.locator(f"button[name=decision][value={DECISIONS[language]}]")
            assert evidence.locator("button[name=decision]").count() == 2
            check(page, f"{step}-03-payment")

            # When they decide, with a reason
            page.locator("#review-reason").fill(REASONS["review"])
            with page.expect_navigation():
                decide.click()

            # Then the decision is made and the page says so, offering no other
            expected = {"accept": ("confirmed", "paid"), "reject": ("rejected", "cancelled")}[DECISIONS[language]]
            decided = PaymentRequest.objects.select_related("order").get(pk=payment.pk)
            assert (decided.status, decided.order.status) == expected
            assert page.locator(".messagelist .success").count() == 1
            assert page.locator("button[name=decision]").count() == 0
            check(page, f"{step}-04-decided")

            # And the "needs review" list holds the payments still waiting
            page.goto("/admin/payments/paymentrequest/?review=waiting")
            assert page.locator("#result_list tbody tr").count() == len(LANGUAGES) - done - 1
            check(page, f"{step}-05-needs-review")

            # And the refund to approve opens from the queue
            page.goto("/admin/")
            refund = world.refund_pending
            page.locator("#staff-queue [data-kind=refund] a", has_text=refund.payment.order.reference).click()
            page.wait_for_url(f"**/admin/payments/refund/{world.refund_pending.pk}/change/")
            assert "2.50 USDC" in page.locator("#content-main").inner_text()
            check(page, f"{step}-06-refund")

            # And the operator console is not theirs: the page names who works there and where their own work is
            response = page.goto("/ops/")
            assert response.status == 403
            assert translated(language, "Operators") in page.locator("main").inner_text()
            assert page.locator("main a[href='/admin/']").count() == 1
            check(page, f"{step}-07-ops")

            # And the ledger is theirs to read
            page.goto("/admin/ledger/")
            assert page.locator("#ledger tbody tr").count() >= 6
            check(page, f"{step}-08-ledger")
        except Exception:
            page_checks.failure(page, f"{step}-failure")
            raise
        finally:
            page.context.close()
    no_english_left(english)


def test_an_operator_sees_what_their_role_can_act_on_in_each_language(
    open_context, page_checks, shop, world, order_payload
):
    from provisioning.models import PreparationRun

    english = {language: EnglishLeft(language, as_written(order_payload)) for language in LANGUAGES}
    runs = PreparationRun.objects.filter(pk=world.run.pk)
    for language in LANGUAGES:
        page = open_context(language).new_page()
        step = f"{language}-staff-operator"
        reference = world.paid.order.reference
        check = checked_in_words(page_checks, english[language])
        runs.update(step="running the GPU preflight", progress=40)
        try:
            # Given the console, in the operator's language
            log_in(page, check, f"{step}-01-login", shop.operator, shop.operator_password, "/ops/")
            assert page.locator("html").get_attribute("lang") == language

            # Then "Needs attention" lists what operators act on (two paid orders, three nodes out of sale), each
            # with a link that works, and counts what waits on the reviewers (late payments, a refund) without
            # linking it
            attention = page.locator("#needs-attention")
            assert attention.locator("tbody tr").count() == 5
            assert attention.locator("tr[data-kind=paid] code", has_text=reference).count() == 1
            assert attention.locator("tr[data-kind=review], tr[data-kind=refund]").count() == 0
            assert translated(language, "Payment reviewers") in page.locator(".staff-others").inner_text()
            for link in attention.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))"):
                assert page.request.get(link).status == 200, link
            assert page.locator("section[aria-labelledby=waiting-title] code", has_text=reference).count() == 1
            assert page.get_by_role("button", name=translated(language, "Restart what is stuck")).count() == 0
            # And at 1280 px no word is broken inside a link, beside the long reason of a node out of sale
            assert page.evaluate(LINK_WORDS_BROKEN, ".staff-console") == [], "words broken inside links at 1280 px"
            # And it never reloads itself, though a preparation runs
            assert page.locator("meta[http-equiv=refresh i]").count() == 0
            # And it fits a phone: nothing scrolls sideways at 390 px, and the first "Prepare" is in the first screen
            assert fits_a_phone(page), "the console scrolls sideways on a phone"
            prepare = on_a_phone(page, PLACE, "section[aria-labelledby=waiting-title] button")
            assert prepare["bottom"] <= PHONE["height"], f"the first Prepare ends {prepare['bottom']} px down a phone"
            check(page, f"{step}-02-ops")
            changed = page.locator("#console-changed")
            assert changed.is_hidden(), "the console says it changed while nothing did"

            # When the preparation moves on while they read
            runs.update(step="reading the report", progress=85)

            # Then the console says so and offers to reload, without reloading by itself
            changed.wait_for(state="visible", timeout=20_000)
            reload = changed.get_by_role("button", name=translated(language, "Reload"))
            check(page, f"{step}-02-ops-changed")
            with page.expect_navigation():
                reload.click()
            running = page.locator("section[aria-labelledby=running-title]")
            assert translated(language, "reading the report") in running.inner_text()

            # And the run's own page, opened from it, reads in their language
            running.locator("a", has_text=world.run.node.name).click()
            page.wait_for_url(f"**/ops/runs/{world.run.pk}/")
            assert translated(language, "reading the report") in page.locator("main").inner_text()
            check(page, f"{step}-02-ops-run")

            # When they open a payment in review anyway (a link in an email, a bookmark)
            response = page.goto(f"/admin/payments/paymentrequest/{world.late[language].pk}/change/")

            # Then the refusal names who can act there, and links their own work
            assert response.status == 403
            assert translated(language, "Payment reviewers") in page.locator("main").inner_text()
            assert page.locator("main a[href='/ops/']").count() == 1
            check(page, f"{step}-03-refused")

            # And the admin's start page shows their own queue
            page.goto("/admin/")
            assert queue_count(page, "paid") == 2  # the overpaid order without an approved refund is paid too
            assert queue_count(page, "node") == len(NODES_OUT)
            assert page.locator("#staff-queue [data-kind=review]").count() == 0
            check(page, f"{step}-04-start")

            # And the console's "Log out" signs them out
            page.goto("/ops/")
            with page.expect_navigation():
                page.locator(".staff-bar__logout button").click()
            assert page.goto("/ops/").url.split("?")[0].endswith("/admin/login/")  # back to the login
            check(page, f"{step}-05-logged-out")
        except Exception:
            page_checks.failure(page, f"{step}-failure")
            raise
        finally:
            page.context.close()
    no_english_left(english)


def test_a_treasurer_reads_the_ledger_with_its_totals_in_each_language(open_context, page_checks, world, order_payload):
    from payments.ledger import ledger_totals_in_database

    english = {language: EnglishLeft(language, as_written(order_payload)) for language in LANGUAGES}
    for language in LANGUAGES:
        page = open_context(language).new_page()
        step = f"{language}-staff-treasurer"
        check = checked_in_words(page_checks, english[language])
        try:
            # Given the admin's start page: the approved refund waits for the signer, and the ledger is linked
            log_in(page, check, f"{step}-01-login", "tom", PASSWORDS["tom"], "/admin/")
            assert queue_count(page, "refund_to_pay") == 1
            check(page, f"{step}-02-start")

            # When they open the ledger
            page.locator("#staff-queue a[href='/admin/ledger/']").click()
            page.wait_for_url("**/admin/ledger/")

            # Then every movement is there, the totals per asset and kind above them, and it fits 1280 px
            assert page.locator("#ledger tbody tr").count() == 6
            totals = page.locator("#ledger-totals tbody tr")
            credit = translated(language, "credit")
            assert totals.first.locator("td").all_inner_texts()[:4] == ["local", "USDC", credit, "6"]
            assert fits(page, VIEWPORT["width"]), "the ledger scrolls sideways at 1280 px"
            # And on a phone every amount is whole, with its asset, inside the screen: none cut at its edge
            cells = on_a_phone(page, AMOUNT_CELLS, "#ledger-totals .staff-number, #ledger .staff-number")
            cut = [cell for cell in cells if not (AMOUNT.fullmatch(cell["text"]) and cell["fits"] and cell["inside"])]
            assert not cut, f"amounts cut on a phone: {cut}"
            shown_totals = [cell["text"] for cell in cells[: totals.count()]]
            assert shown_totals == [total.amount for total in ledger_totals_in_database()]
            check(page, f"{step}-03-ledger")

            # When they filter one kind of movement
            page.locator("select[name=kind]").select_option("credit")
            with page.expect_navigation():
                page.locator(".ledger-filters [type=submit]").click()
            assert page.locator("#ledger-totals tbody tr").count() == 1
            check(page, f"{step}-04-ledger-filtered")

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
            check(page, f"{step}-05-ops")
        except Exception:
            page_checks.failure(page, f"{step}-failure")
            raise
        finally:
            page.context.close()
    no_english_left(english)


def test_axe_core_finds_no_serious_or_critical_violation_on_any_page(page_checks):
    """axe-core ran on every page of the walks above as it was shown; this reports what it found."""
    axe_clean(page_checks, "the staff walks")


def test_the_nu_html_checker_finds_no_error_in_the_rendered_pages(page_checks):
    """The Nu HTML checker over the HTML of every page the walks above rendered, in one run."""
    nu_clean(page_checks, "the staff walks")

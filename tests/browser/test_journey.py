"""The whole customer journey in a real browser (Chromium), once per language: the home page, the fit advisor,
the four-step order wizard, a USDC payment on the local anvil chain, the operator's preparation with the
`local` driver, and the access details on the customer's page. Each page is screenshotted (into
docs/screenshots/ with `make screenshots`) and checked by axe-core as it is shown; the module's last two tests
report axe-core's and the Nu HTML checker's findings over every page."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import translation
from django.utils.translation import gettext

from core.money_text import amount_l10n
from tests.browser.checks import PHONE, axe_clean, nu_clean

# The live server and the test share the database (transactions committed); the catalog is data from the
# migrations, restored before each test.
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

LANGUAGES = ["en", "es", "fr"]
PARAMETERS = 13_000_000_000  # 13B in BF16 mixed precision with AdamW: too big for one B200, fits the pair sharded
DURATION_DAYS = 7  # the configure step changes the default (the shortest) to this
PAYMENT_OPTION = "local:USDC"
PREPARATION = "two-card-distributed"  # the sharded rehearsal, for a model the advisor says needs the pair sharded
LIVE_UPDATE_MS = 30_000  # the order page's script polls every few seconds
PREFLIGHT_TIMEOUT_MS = 180_000  # the preparation runs in the request (Celery is eager here): ~10 s on a CPU


def translated(language: str, message: str) -> str:
    with translation.override(language):
        return gettext(message)


def digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def enhanced(page, marker: str) -> bool:
    """Whether the page opts into a progressive enhancement (its marker attribute) and serves its scripts:
    then the page must update by itself, without a reload or a button."""
    if not page.locator(marker).count():
        return False
    sources = page.locator("script[src]").evaluate_all("scripts => scripts.map(s => s.src)")
    return bool(sources) and all(page.request.get(source).ok for source in sources)


def advisor(page, check, language: str) -> int:
    """The customer describes 13B parameters in BF16 mixed precision with AdamW, sharded, reads the verdict
    (the pair, sharded) and follows its link to the order; returns the lots it prefills."""
    from shop.advice import advice_for_current_lot
    from shop.advisor import FitRequest, Verdict

    page.locator("main a[href$='/advisor/']").first.click()
    page.wait_for_url("**/advisor/")
    check(page, f"{language}-02-advisor")
    page.locator("#id_parameters").fill("13B")
    page.locator("input[name=precision][value=bf16_mixed]").check()
    page.locator("input[name=optimizer][value=adamw]").check()
    page.locator("input[name=strategy][value=sharded]").check()
    page.locator("form[action$='/advisor/'] button[type=submit]").click()
    page.locator("#result-title").wait_for()

    request = FitRequest(parameters=PARAMETERS, precision="bf16_mixed", optimizer="adamw", strategy="sharded")
    with translation.override(language):
        expected = advice_for_current_lot(request)
        title, message = str(expected.title), str(expected.message)
    assert expected.verdict == Verdict.NEEDS_PAIR_SHARDED and expected.lots
    assert page.locator("#result-title").inner_text() == title
    shown = page.locator(".advisor-result [role=status]").inner_text()
    assert " ".join(shown.split()) == " ".join(message.split())
    check(page, f"{language}-03-advisor-verdict")

    page.locator(f".advisor-result a[href$='/order/?lots={expected.lots}']").click()
    page.wait_for_url(f"**/order/?lots={expected.lots}")
    return expected.lots


def configure(page, check, language: str, lots: int) -> None:
    """The lots come prefilled; a longer duration changes the total (by itself with JavaScript)."""
    from orders.models import Duration

    assert page.locator("#id_lots").input_value() == str(lots), "the advisor's lots are not prefilled"
    live = enhanced(page, "[data-summary]")
    page.locator(f"input[name=preparation][value='{PREPARATION}']").check()
    total = page.locator(".summary__total dd")
    before = total.inner_text()
    page.locator(f"input[name=duration_days][value='{DURATION_DAYS}']").check()
    if not live:
        page.locator("button[name=refresh]").click()  # "Update summary", the form's way without JavaScript
        page.wait_for_load_state("load")
    expected = Duration.objects.get(days=DURATION_DAYS).price_per_lot_usd * lots
    page.wait_for_function(
        "([selector, digits]) => document.querySelector(selector).textContent.replace(/\\D/g, '').startsWith(digits)",
        arg=[".summary__total dd", digits(f"{expected:.2f}")],
    )
    assert total.inner_text() != before
    # Written as the server writes it (issue 40): Spanish groups "3 980,00" where the browser's Intl would not
    with translation.override(language):
        assert total.inner_text() == f"{amount_l10n(expected, 2)} USD"
    check(page, f"{language}-04-configure")
    page.locator("button[name=continue]").click()
    page.wait_for_url("**/order/contact/")


def contact(page, check, language: str, public_key: str) -> None:
    page.locator("#id_first_name").fill("Ada")
    page.locator("#id_last_name").fill("Lovelace Byron")
    page.locator("#id_email").fill("ada@example.org")
    page.locator("#id_ssh_public_key").focus()
    page.keyboard.insert_text(public_key)  # pasted from the .pub file: one text insertion, as a paste makes
    page.locator("input[name=hypothesis_kind][value=make_possible]").check()
    page.locator("#id_hypothesis").fill("A 13B model with AdamW fits only when sharded over both cards.")
    page.locator("#id_terms").check()
    check(page, f"{language}-05-contact")
    page.locator("form.form button[type=submit]").click()
    page.wait_for_url("**/order/payment/")


def payment(page, check, language: str) -> None:
    page.locator(f"input[name=payment_option][value='{PAYMENT_OPTION}']").check()
    check(page, f"{language}-06-payment")
    page.locator("form.form button[type=submit]").click()
    page.wait_for_url("**/order/review/")


def review_and_place(page, check, language: str, public_key: str) -> str:
    main = page.locator("main").inner_text()
    assert "USDC" in main and "Ada Lovelace Byron" in main and public_key[:40] in main
    check(page, f"{language}-07-review")
    page.locator("form.form--place button[type=submit]").click()
    page.wait_for_url(re.compile(r"/o/B2-[A-Z0-9-]+/[^/]+/$"))
    return re.search(r"/o/(B2-[A-Z0-9-]+)/", page.url).group(1)


def order_page_shows_the_request(page, check, language: str, reference: str, lots: int):
    from payments.models import PaymentRequest
    from payments.quotes import format_units

    request = PaymentRequest.objects.select_related("order", "asset__network").get(order__reference=reference)
    order = request.order
    assert (order.language, order.lots, order.duration_days) == (language, lots, DURATION_DAYS)
    assert order.preparation.slug == PREPARATION
    copied = page.locator("#pay-card [data-copy-value]").evaluate_all("els => els.map(e => e.dataset.copyValue)")
    amount, address = copied[:2]
    assert address == request.address and page.locator("#pay-address").inner_text() == request.address
    assert amount == format_units(request.amount_base_units, request.decimals) and Decimal(amount) > 0
    assert request.asset.symbol == "USDC" and request.asset.network.slug == "local"
    check(page, f"{language}-08-order")
    return request


def wait_for_status(page, selector: str, live: bool) -> None:
    """With the live status script the page changes by itself; without it, the customer reloads."""
    if not live:
        page.reload()
    page.locator(selector).first.wait_for(timeout=LIVE_UPDATE_MS)


def pay_and_report(page, check, language: str, shop, request) -> bool:
    """The transfer is sent from anvil's funded account; the customer presses "I have paid" with its hash;
    two more blocks and one verification pass confirm it. Returns whether the page updates by itself."""
    from payments.devnet import devnet_pay
    from payments.networks import rpc_client

    live = enhanced(page, "[data-order-live]")
    tx_hash = devnet_pay(client=rpc_client(request.asset.network), payment=request)
    page.locator("form.paid-form summary").click()  # the hash is optional: folded under the button
    page.locator("#id_tx_hash").fill(tx_hash)
    with page.expect_navigation():  # the form posts (the old page's status may change meanwhile)
        page.locator(".paid-button").click()
    # The notice's check finds the transfer at once: seen (confirmed already when the chain mined one more block
    # for devnet_pay, which it does when a receipt is late).
    page.locator(".status--detected, .status--confirmed").first.wait_for(timeout=LIVE_UPDATE_MS)
    # Once the whole amount is seen the instructions give way to the progress (issue 40): no card, no countdown,
    # no QR and no "I have paid" inviting a second payment while it confirms
    assert page.locator("#pay-card, .paid-button, [data-countdown-to], .qr").count() == 0
    check(page, f"{language}-09-reported")

    shop.anvil.mine(2)  # the local network needs 2 confirmations
    call_command("scan_payments")
    wait_for_status(page, ".status--paid", live)
    page.locator(".status--confirmed").first.wait_for()
    # Nobody pressed "Prepare" yet: the page says it waits for an operator, not that the node is being prepared
    waits = translated(
        language,
        "Your payment is confirmed. Your node waits for an operator to start its preparation and GPU check: they "
        "were told at once. Nothing to do: this page updates by itself.",
    )
    assert waits in page.locator("[data-story=paid]").inner_text()
    check(page, f"{language}-10-paid")
    return live


def operator_prepares(ops, check, language: str, shop, reference: str) -> None:
    """The operator logs in, finds the paid order in the console and presses "Prepare" (the preflight runs)."""
    ops.goto("/admin/login/?next=/ops/")
    ops.locator("#id_username").fill(shop.operator)
    ops.locator("#id_password").fill(shop.operator_password)
    check(ops, f"{language}-11-ops-login")
    ops.locator("#login-form [type=submit]").click()
    ops.wait_for_url("**/ops/")
    row = ops.locator("tr", has=ops.locator("code", has_text=reference))
    check(ops, f"{language}-12-ops")
    with ops.expect_navigation(timeout=PREFLIGHT_TIMEOUT_MS):
        # the click waits for the response, which comes once the preflight has run: as long as the navigation
        row.get_by_role("button", name="Prepare").click(timeout=PREFLIGHT_TIMEOUT_MS)
    ops.locator("section[aria-labelledby=active-title] code", has_text=reference).wait_for()
    check(ops, f"{language}-13-ops-prepared")


def customer_sees_access(page, check, language: str, shop, reference: str, live: bool) -> None:
    """The order moved on while the operator worked: with the live script the page reloads itself (to the
    preparation, then to the access); without it, the customer reloads."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from provisioning.models import AccessGrant

    access = page.locator("section.access")
    if live:
        try:
            access.wait_for(timeout=LIVE_UPDATE_MS)
        except PlaywrightTimeout:  # the live script follows the payment; the access details may need the page
            page.reload()
    else:
        page.reload()
    access.wait_for()
    grant = AccessGrant.objects.get(order__reference=reference)
    assert page.locator("#access-title").inner_text() == translated(language, "Your access")
    assert page.locator("#ssh-1").input_value() == grant.ssh_command
    assert grant.ssh_command == f"ssh -p {shop.node.port} {grant.account}@{shop.node.host}"
    assert grant.host_key_fingerprint.startswith("SHA256:") and grant.host_key_fingerprint in access.inner_text()
    response = page.request.get(access.locator("a[href$='manifest.json']").get_attribute("href"))
    assert response.ok, response.status
    manifest = response.json()
    assert manifest["body"]["order_reference"] == reference and manifest["signature"]
    check(page, f"{language}-14-access")


def on_a_phone_the_access_leads(page, language: str, reference: str) -> None:
    """On a phone (390×844) the ssh command and the time left are on the first screen (issue 40: they were two
    screens down); a new key being installed, its fingerprint in a notice, never widens the page."""
    from orders.models import Order, SshKeyChange

    viewport = page.viewport_size
    page.set_viewport_size(PHONE)
    try:
        page.evaluate("() => window.scrollTo(0, 0)")
        for what in ("#ssh-1", "#time-left-1"):
            box = page.locator(what).bounding_box()
            assert box and box["y"] + box["height"] <= PHONE["height"], f"{what} is below a phone's first screen"
        with translation.override(language):
            left = gettext("Time left: %(left)s") % {"left": ""}
        assert page.locator("#time-left-1").inner_text().startswith(left.strip())
        assert re.search(r"\d", page.locator("#time-left-1").inner_text())

        order = Order.objects.get(reference=reference)
        SshKeyChange.objects.create(
            order=order, old_fingerprint=order.ssh_key_fingerprint, new_fingerprint="SHA256:" + "x" * 43
        )
        page.reload()
        page.locator("#ssh-key-pending").wait_for()
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the page is {width} px wide on a {PHONE['width']} px phone"
    finally:
        page.set_viewport_size(viewport)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_customer_goes_from_the_home_page_through_the_advisor_to_ssh_access(
    open_context, page_checks, shop, language
):
    from orders.models import Order, OrderStatus

    page = open_context(language).new_page()
    ops = open_context().new_page()  # the operator's own browser
    try:
        # Given the home page, in the customer's language (Accept-Language)
        page.goto("/")
        assert page.locator("html").get_attribute("lang") == language
        page_checks(page, f"{language}-01-home")

        # When they ask the advisor, order what it recommends, pay in USDC and press "I have paid"
        lots = advisor(page, page_checks, language)
        configure(page, page_checks, language, lots)
        contact(page, page_checks, language, shop.customer_public_key)
        payment(page, page_checks, language)
        reference = review_and_place(page, page_checks, language, shop.customer_public_key)
        request = order_page_shows_the_request(page, page_checks, language, reference, lots)
        live = pay_and_report(page, page_checks, language, shop, request)

        # And an operator prepares the paid order from the console
        operator_prepares(ops, page_checks, language, shop, reference)

        # Then the customer's page shows the access details and the signed manifest
        customer_sees_access(page, page_checks, language, shop, reference, live)
        assert Order.objects.get(reference=reference).status == OrderStatus.ACTIVE
        on_a_phone_the_access_leads(page, language, reference)
    except Exception:
        page_checks.failure(page, f"{language}-failure")
        page_checks.failure(ops, f"{language}-failure-ops")
        raise


def test_axe_core_finds_no_serious_or_critical_violation_on_any_page(page_checks):
    """axe-core ran on every page of the journeys above as it was shown; this reports what it found."""
    axe_clean(page_checks, "the journeys")


def test_the_nu_html_checker_finds_no_error_in_the_rendered_pages(page_checks):
    """The Nu HTML checker over the HTML of every page the journeys above rendered, in one run."""
    nu_clean(page_checks, "the journeys")

"""The order page where customers pay: on a phone next to a wallet app (390×844), in English, Spanish and French.

An unpaid order's first screen holds the payment card (amount, address, QR, "I have paid"); the address is shown
whole, in groups, and copied without the gaps; amounts follow the page's locale and are copied as wallets take
them. Each state tells one story with its next action: the window ending (the card goes at once), an expired
order (start a new one), "I have paid" with nothing found after a few minutes (check the network and the
address), a wrong token (give the refund address), a shortfall (the card asks for the missing amount, first), a
refund owed on a cancelled order (it leads). A reload after a refused transaction hash reads the page again, and
the amounts the script writes read as the server writes them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone, translation
from django.utils.formats import number_format
from django.utils.translation import gettext

from tests.browser.checks import axe_clean, nu_clean
from tests.browser.conftest import TIME_ZONES, order_placed

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

PHONE = {"width": 390, "height": 844}
LANGUAGES = ["en", "es", "fr"]


@pytest.fixture
def phone(browser, live_server):
    """A phone's browser in the customer's language: 390×844, touch, the language's locale and time zone."""
    contexts = []

    def open_(language: str):
        context = browser.new_context(
            base_url=live_server.url,
            viewport=PHONE,
            is_mobile=True,
            has_touch=True,
            locale=language,
            timezone_id=TIME_ZONES[language],
            extra_http_headers={"Accept-Language": f"{language},en;q=0.5"},
            bypass_csp=True,  # axe-core is injected
        )
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        context.set_default_timeout(30_000)
        contexts.append(context)
        return context.new_page()

    yield open_
    for context in contexts:
        context.close()


def translated(language: str, message: str) -> str:
    with translation.override(language):
        return gettext(message)


def path_of(placed: dict) -> str:
    return "/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1]


def payment_of(placed: dict):
    from payments.models import PaymentRequest

    return PaymentRequest.objects.select_related("asset__network").get(
        order__reference=placed["reference"], extension=None
    )


def bottom_of(page, selector: str) -> float:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box["y"] + box["height"]


def copied_by(page, button) -> str:
    button.click()
    return page.evaluate("() => navigator.clipboard.readText()")


@pytest.mark.parametrize("language", LANGUAGES)
def test_an_unpaid_order_on_a_phone_shows_the_whole_payment_on_its_first_screen(
    phone, page_checks, shop, order_payload, language
):
    placed = order_placed(shop, order_payload, asset="ETH", language=language)
    payment = payment_of(placed)
    page = phone(language)
    try:
        # Given the order's page opened on a phone
        page.goto(path_of(placed))
        page.locator("[data-pay-card]").wait_for()
        page_checks(page, f"{language}-order-01-phone-card")

        # Then the amount, the address, the QR code and "I have paid" are on the first screen (844 px)
        page.evaluate("() => window.scrollTo(0, 0)")
        for what in ("#pay-amount", "#pay-address", "#pay-card .qr", "#pay-card .paid-button"):
            assert bottom_of(page, what) <= PHONE["height"], f"{what} is below the first screen of a phone"
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]

        # And the address is shown whole, in groups of four, its two ends marked
        address = page.locator("#pay-address")
        assert address.inner_text().replace(" ", "").replace("\n", "") == payment.address
        groups = address.locator(".address__group").all_inner_texts()
        assert groups[0] == "0x" and all(len(g) == 4 for g in groups[1:]) and "".join(groups) == payment.address
        assert address.locator(".address__group--end").all_inner_texts() == [groups[1], groups[-1]]
        box = address.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], "the address runs off the screen"

        # And the copy buttons copy what a wallet takes: the address without gaps, the amount with a point
        card = page.locator("#pay-card")
        assert copied_by(page, card.locator(".copy-button").nth(1)) == payment.address
        amount_text = str(payment.amount)
        assert copied_by(page, card.locator(".copy-button").first) == amount_text

        # And the amount is written in the page's language, rounded to what a wallet can send
        with translation.override(language):
            shown = number_format(Decimal(amount_text), use_l10n=True, force_grouping=True)
        assert page.locator("#pay-amount").inner_text() == shown
        fraction = amount_text.partition(".")[2]
        assert len(fraction.lstrip("0")) <= 6, f"{amount_text} ETH is more precise than wallets send"
    except Exception:
        page_checks.failure(page, f"{language}-order-phone-failure")
        raise


@pytest.mark.parametrize("language", LANGUAGES)
def test_when_the_window_ends_the_card_goes_at_once_and_an_expired_order_offers_a_new_one(
    phone, page_checks, shop, order_payload, language
):
    from orders.orders import orders_expire_overdue
    from payments.models import PaymentRequest

    placed = order_placed(shop, order_payload, language=language)
    payment = payment_of(placed)
    PaymentRequest.objects.filter(pk=payment.pk).update(expires_at=timezone.now() + dt.timedelta(seconds=4))
    page = phone(language)
    try:
        # Given the order page a few seconds before the window ends
        page.goto(path_of(placed))
        page.locator("#pay-card .pay-card__payable").wait_for()

        # When the countdown reaches zero, the card stops offering the payment at once, before the server acts
        page.locator("#pay-card .pay-card__ended").wait_for(timeout=15_000)
        assert not page.locator("#pay-card .pay-card__payable").is_visible()
        page_checks(page, f"{language}-order-02-window-ended")

        # And the server's page says the same without the card, until the order expires
        page.reload()
        assert page.locator("[data-story=window_ended]").is_visible()
        assert page.locator("[data-pay-card]").count() == 0

        # When the order expires (its lots were held as long as the quote was first given: the beat task runs
        # after that)
        assert orders_expire_overdue(now=timezone.now() + dt.timedelta(hours=3)) == 1
        page.reload()

        # Then one story: expired, with the way to start again; no address, QR, badge or "I have paid"
        story = page.locator("[data-story=expired]")
        assert story.is_visible()
        new_order = story.get_by_role("link", name=translated(language, "Start a new order"))
        assert new_order.get_attribute("href").endswith(f"/order/?lots={order_payload['lots']}")
        main = page.locator("main").inner_text()
        assert payment.address not in main.replace(" ", "").replace("\n", "")
        assert page.locator(".qr, form.paid-form, .status--pending, #order-timeline").count() == 0
        page_checks(page, f"{language}-order-03-expired")
        new_order.click()
        page.wait_for_url("**/order/?lots=*")
    except Exception:
        page_checks.failure(page, f"{language}-order-expiry-failure")
        raise


@pytest.mark.parametrize("language", LANGUAGES)
def test_i_have_paid_with_nothing_sent_asks_to_check_the_network_after_a_few_minutes(
    phone, page_checks, shop, order_payload, language
):
    from payments.models import Notice

    placed = order_placed(shop, order_payload, language=language)
    page = phone(language)
    try:
        # Given a customer who presses "I have paid" without sending anything
        page.goto(path_of(placed))
        with page.expect_navigation():
            page.locator("#pay-card .paid-button").click()

        # Then the page says it is looking, and keeps the card
        assert page.locator("[data-story=looking]").is_visible()
        assert page.locator("#pay-card").is_visible()
        page_checks(page, f"{language}-order-04-looking")

        # When six minutes pass with nothing found
        Notice.objects.update(created_at=timezone.now() - dt.timedelta(minutes=6))
        page.reload()

        # Then it asks them to check the network, the token and the address, and still offers the payment
        story = page.locator("[data-story=not_found]")
        assert story.is_visible()
        assert "USDC" in story.inner_text() and payment_of(placed).asset.network.name in story.inner_text()
        assert page.locator("[data-story=looking]").count() == 0
        assert page.locator("#pay-card").is_visible()
        page_checks(page, f"{language}-order-05-not-found")
    except Exception:
        page_checks.failure(page, f"{language}-order-not-found-failure")
        raise


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_reload_after_a_bad_transaction_hash_reads_the_page_and_posts_nothing_again(
    phone, shop, order_payload, language
):
    from payments.models import Notice

    placed = order_placed(shop, order_payload, language=language)
    page = phone(language)
    posts: list[str] = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)

    # Given "I have paid" sent with a hash one character short
    page.goto(path_of(placed))
    page.locator("form.paid-form summary").click()
    page.locator("#id_tx_hash").fill("0x" + "ab" * 31 + "c")
    with page.expect_navigation():
        page.locator("#pay-card .paid-button").click()

    # Then the error is on the field, and the address bar holds the page's own address, not the form's
    assert page.locator("#id_tx_hash").get_attribute("aria-invalid") == "true"
    assert page.locator("#id_tx_hash_error").is_visible()
    assert page.evaluate("() => window.location.pathname") == path_of(placed)
    assert len(posts) == 1

    # When the customer reloads
    page.reload()

    # Then the page is read again (no second POST, no browser asking to resend), with its card and no error
    page.locator("#pay-card").wait_for()
    assert len(posts) == 1, posts
    assert page.locator("#id_tx_hash_error").count() == 0
    assert not Notice.objects.exists()


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_wrong_token_leads_with_the_refund_address_to_give(phone, page_checks, shop, order_payload, language):
    from payments.devnet import devnet_mint
    from payments.networks import rpc_client

    placed = order_placed(shop, order_payload, language=language)
    payment = payment_of(placed)
    page = phone(language)
    try:
        # Given USDT sent to a USDC order's address, final
        devnet_mint(client=rpc_client(payment.asset.network), symbol="USDT", to=payment.address, amount=Decimal(899))
        shop.anvil.mine(2)
        call_command("scan_payments")

        # When the customer opens the page
        page.goto(path_of(placed))

        # Then it leads with one story: money is due back, give the address; nothing says "nothing to do"
        story = page.locator("[data-story=refund_address]")
        assert story.is_visible()
        with translation.override(language):
            nothing_to_do = gettext(
                "Your payment needs a manual check. A reviewer will settle it; you do not need to do anything for now."
            )
        assert nothing_to_do not in page.locator("main").inner_text()
        assert page.locator("[data-pay-card]").count() == 0
        page_checks(page, f"{language}-order-06-wrong-token")

        # And its button leads to the refund form
        story.get_by_role("link").click()
        page.locator("form.refund-form input[name=address]").wait_for()
        assert page.evaluate("() => window.location.hash").startswith("#refund-")
    except Exception:
        page_checks.failure(page, f"{language}-order-wrong-token-failure")
        raise


@pytest.mark.parametrize("language", LANGUAGES)
def test_an_underpayment_seen_on_a_phone_asks_for_the_missing_amount_first_with_its_own_worth(
    phone, page_checks, shop, order_payload, language
):
    from payments.devnet import devnet_pay
    from payments.networks import rpc_client
    from payments.quotes import format_units

    placed = order_placed(shop, order_payload, asset="ETH", language=language)
    payment = payment_of(placed)
    page = phone(language)
    try:
        # Given 60 % of the quoted ETH sent and seen by the scan
        sent = (Decimal(str(payment.amount)) * Decimal("0.6")).quantize(Decimal("0.000001"))
        devnet_pay(client=rpc_client(payment.asset.network), payment=payment, amount=sent)
        call_command("scan_payments")
        payment.refresh_from_db()
        assert payment.status in ("detected", "underpaid")
        assert 0 < payment.received_base_units < payment.amount_base_units

        # When the customer opens the page on a phone
        page.goto(path_of(placed))
        card = page.locator("#pay-card")
        card.wait_for()

        # Then the card comes first and asks for the missing amount, worth its own share of the price (issue 40:
        # it said the whole order's)
        missing = int(payment.amount_base_units) - int(payment.received_base_units)
        worth = (payment.amount_usd * missing / int(payment.amount_base_units)).quantize(Decimal("0.01"))
        with translation.override(language):
            missing_text = number_format(
                Decimal(format_units(missing, payment.decimals)), use_l10n=True, force_grouping=True
            )
            worth_text = number_format(worth, 2, use_l10n=True, force_grouping=True)
            total_text = number_format(payment.amount_usd, 2, use_l10n=True, force_grouping=True)
        assert card.locator("#pay-title").inner_text() == translated(language, "Send the missing amount")
        # (the shortfall is named as soon as it is seen, not once it is final)
        assert page.locator("[data-story=detected_short], [data-story=underpaid]").is_visible()
        assert page.locator("#pay-amount").inner_text() == missing_text
        network_line = card.locator(".pay-card__network").inner_text()
        assert f"{worth_text} USD" in network_line and total_text not in network_line
        card_first = page.evaluate(
            "() => document.querySelector('#pay-card').compareDocumentPosition(document.querySelector('.story')) "
            "& Node.DOCUMENT_POSITION_FOLLOWING"
        )
        assert card_first, "the shortfall's story comes before its card"

        # And the missing amount, the address, the QR code and "I have paid" are on the first screen (844 px)
        page.evaluate("() => window.scrollTo(0, 0)")
        for what in ("#pay-amount", "#pay-address", "#pay-card .qr", "#pay-card .paid-button"):
            assert bottom_of(page, what) <= PHONE["height"], f"{what} is below the first screen of a phone"
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
        page_checks(page, f"{language}-order-07-short")
    except Exception:
        page_checks.failure(page, f"{language}-order-short-failure")
        raise


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_amount_the_script_writes_reads_as_the_server_writes_it(phone, shop, order_payload, language):
    from payments.models import PaymentRequest
    from payments.quotes import format_units

    placed = order_placed(shop, order_payload, asset="ETH", language=language)
    payment = payment_of(placed)
    # Given the whole quote seen arriving, with more blocks on top than the 2 confirmations the network asks for
    # (a payment can wait on a person while blocks keep coming), as the scan records it
    PaymentRequest.objects.filter(pk=payment.pk).update(
        status="detected", confirmations=4, received_base_units=payment.amount_base_units
    )
    page = phone(language)

    # When the page's script has applied the order API's answer (it rewrites the "we see it arriving" story)
    with page.expect_response(lambda response: f"/api/v1/orders/{placed['reference']}/" in response.url):
        page.goto(path_of(placed))
    page.wait_for_timeout(500)

    # Then the amount reads as the server writes it in the page's language (French "0,663334", not "0.663334")
    with translation.override(language):
        received = number_format(
            Decimal(format_units(payment.amount_base_units, payment.decimals)), use_l10n=True, force_grouping=True
        )
    notice = page.locator("[data-story=detected] [data-live-notice]").inner_text()
    assert f"{received} ETH" in notice, notice
    # And it never reads "4 of 2"
    with translation.override(language):
        expected = gettext(
            "We see %(received)s %(asset)s arriving. Waiting for confirmations: %(confirmations)s of %(required)s. "
            "Nothing to do: this page updates by itself."
        ) % {"received": received, "asset": "ETH", "confirmations": 2, "required": 2}
    assert notice == expected


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_cancelled_order_that_owes_a_refund_leads_with_it_on_a_phone(
    phone, page_checks, shop, order_payload, language
):
    from orders.models import Order, OrderStatus
    from payments.models import Refund

    placed = order_placed(shop, order_payload, language=language)
    payment = payment_of(placed)
    # Given a cancelled order whose refund has its address and waits for a reviewer
    Order.objects.filter(reference=placed["reference"]).update(status=OrderStatus.CANCELLED)
    refund = Refund.objects.create(
        payment=payment, reason="goodwill", network=payment.asset.network, chain_id=payment.chain_id,
        amount_base_units=1000, decimals=6, symbol="USDC", to_address="0x" + "ab" * 20, status="pending_approval",
    )  # fmt: skip
    page = phone(language)
    try:
        # When the customer opens the page on a phone
        page.goto(path_of(placed))

        # Then the money owed leads, on the first screen, and its button goes to the refund (issue 40: it hid
        # behind "This order was cancelled" and "Start a new order")
        story = page.locator("[data-story=refund_owed]")
        assert story.is_visible()
        lead = story.get_by_role("link", name=translated(language, "See your refund"))
        assert "button--primary" in lead.get_attribute("class")
        assert bottom_of(page, "[data-story=refund_owed] .button--primary") <= PHONE["height"]
        page_checks(page, f"{language}-order-08-refund-owed")
        lead.click()
        assert page.evaluate("() => window.location.hash") == f"#refund-{refund.pk}"
    except Exception:
        page_checks.failure(page, f"{language}-order-refund-owed-failure")
        raise


def test_axe_core_and_the_nu_html_checker_find_nothing_on_the_order_pages(page_checks):
    axe_clean(page_checks, "the order page tests")
    nu_clean(page_checks, "the order page tests")

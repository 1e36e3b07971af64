"""The reviewer's admin pages on real money (anvil): the start page's queue, the "needs review" filter, accept
and reject on the payment's own page beside the evidence, and every amount in units with its symbol.

The money figure first: a late payment of the full amount is shown as received in full (its credit is `late`,
not `match`, so the payment's `received_base_units` stays 0), never as "received 0 of 899000000 base units"."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone

from core.amounts import units_text
from payments.models import PaymentEvent, PaymentRequest
from payments.review import payment_evidence
from tests.payments.verification.helpers import order_of, pay, payment_of, units
from tests.staff import STAFF_PASSWORD

PAYMENTS_ADMIN = "/admin/payments/paymentrequest/"


def usdc(base_units: int) -> str:
    return units_text(base_units, 6, "USDC")


def text(response) -> str:
    """The page's visible words, tags removed and white space folded."""
    html = response.content.decode()
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_units_are_written_with_two_decimals_at_least_and_the_symbol():
    assert units_text(899_000_000, 6, "USDC") == "899.00 USDC"
    assert units_text(1_500_000, 6, "USDC") == "1.50 USDC"
    assert units_text(1_234_567, 6, "USDC") == "1.234567 USDC"
    assert units_text(1_500_000_000_000_000, 18, "ETH") == "0.0015 ETH"
    assert units_text(7, 0, "PTS") == "7 PTS"


def test_a_late_payment_in_full_is_evidence_of_the_full_amount_received(late_payment):
    # Given a late payment of the full amount (its credit is `late`: the payment's own figure stays 0)
    payment = payment_of(late_payment)
    assert int(payment.received_base_units) == 0

    # When its evidence is read
    evidence = payment_evidence(payment)

    # Then it says what is on the address in the asset asked for, in units, and that it came late
    asked = usdc(units(late_payment))
    assert (evidence.asked, evidence.received, evidence.late) == (asked, asked, True)
    assert evidence.text == f"received {asked} of {asked}, after the deadline"
    assert [credit.amount for credit in evidence.credits] == [asked]


def test_the_accept_page_of_a_late_payment_says_it_received_the_full_amount_in_units(late_payment, reviewer, client):
    # Given a late payment of the full amount and a reviewer in the admin
    payment = payment_of(late_payment)
    assert client.login(username="rita", password=STAFF_PASSWORD)

    # When they choose "accept" in the list (the page asking for the reason)
    page = client.post(PAYMENTS_ADMIN, {"action": "accept", "_selected_action": [payment.pk]})

    # Then it says the full amount arrived, in units with the symbol, and never in base units
    assert page.status_code == 200
    asked = usdc(units(late_payment))
    assert f"received {asked} of {asked}, after the deadline" in text(page)
    assert "base units" not in text(page)
    assert "received 0 of" not in text(page)


def test_every_amount_on_the_payment_list_and_page_is_in_units_with_its_symbol(late_payment, reviewer, client):
    # Given a late payment and a reviewer in the admin
    payment = payment_of(late_payment)
    client.login(username="rita", password=STAFF_PASSWORD)
    raw = str(units(late_payment))

    # When they open the list of payments and the payment's page
    listing, page = client.get(PAYMENTS_ADMIN), client.get(f"{PAYMENTS_ADMIN}{payment.pk}/change/")

    # Then the amounts are written in USDC, never as a bare number of base units
    asked = usdc(units(late_payment))
    for response in (listing, page):
        assert response.status_code == 200
        assert asked in text(response)
        assert not re.search(rf"\b{raw}\b", text(response)), "an amount in base units alone"
        assert "base units" not in text(response)
    # And the order's page (its payment inline) too
    order_page = client.get(f"/admin/orders/order/{order_of(late_payment).pk}/change/")
    assert asked in text(order_page) and not re.search(rf"\b{raw}\b", text(order_page))


def test_the_needs_review_filter_lists_only_the_payments_waiting_for_a_reviewer(
    late_payment, chain, customer, scan_pass, reviewer, client
):
    # Given a late payment in review and another paid in full (nothing to review)
    paid = pay(chain, customer, scan_pass)
    client.login(username="rita", password=STAFF_PASSWORD)

    # When the reviewer filters the list on "needs review"
    listing = client.get(PAYMENTS_ADMIN)
    waiting = client.get(f"{PAYMENTS_ADMIN}?review=waiting")

    # Then the filter is offered, and lists the late payment alone
    assert "needs review" in text(listing).lower()
    assert late_payment["reference"] in text(waiting)
    assert paid["reference"] not in text(waiting)


def test_the_payment_page_has_accept_and_reject_beside_the_evidence(late_payment, reviewer, client):
    # Given a late payment and a reviewer on its page
    payment = payment_of(late_payment)
    client.login(username="rita", password=STAFF_PASSWORD)
    page = client.get(f"{PAYMENTS_ADMIN}{payment.pk}/change/").content.decode()

    # Then the evidence (what arrived, the transfer) and the two decisions are there, with a reason field
    section = page.split('id="review-decision"', 1)[1].split("</section>", 1)[0]
    credit = payment.credits.get()
    assert credit.tx_hash in section
    assert f"{PAYMENTS_ADMIN}{payment.pk}/decide/" in section
    assert 'name="reason"' in section and "required" in section
    assert re.search(r'<button[^>]*name="decision"[^>]*value="accept"', section)
    assert re.search(r'<button[^>]*name="decision"[^>]*value="reject"', section)


def decision_buttons(page: str) -> list[tuple[str, str]]:
    """The decision buttons of a payment's page, in order: (value, class)."""
    section = page.split('id="review-decision"', 1)[1].split("</section>", 1)[0]
    return re.findall(r'<button[^>]*name="decision" value="(\w+)" class="([^"]*)"', section)


def test_where_money_arrived_accept_leads(late_payment, reviewer, client):
    client.login(username="rita", password=STAFF_PASSWORD)
    page = client.get(f"{PAYMENTS_ADMIN}{payment_of(late_payment).pk}/change/").content.decode()

    assert decision_buttons(page) == [
        ("accept", "staff-button staff-button--accept"),
        ("reject", "staff-button staff-button--reject"),
    ]


def test_where_nothing_arrived_in_the_asset_asked_for_reject_leads_and_accept_says_so(
    chain, customer, scan_pass, reviewer, client
):
    # Given a USDC order whose address received USDT only: in review, nothing arrived in USDC
    placed = customer.order()
    chain.wallet.pay_token(chain.usdt, placed["payment"]["address"], units(placed))
    chain.mine(2)
    scan_pass()
    payment = payment_of(placed)
    assert (payment.status, order_of(placed).status) == ("wrong_network", "needs_review")

    # When a reviewer opens its page
    client.login(username="rita", password=STAFF_PASSWORD)
    page = client.get(f"{PAYMENTS_ADMIN}{payment.pk}/change/").content.decode()

    # Then rejecting is the button that leads, and accepting is offered as the secondary one that says why
    # (issue 40: "Accept" led, for an order nothing paid)
    assert decision_buttons(page) == [
        ("reject", "staff-button staff-button--reject"),
        ("accept", "staff-button staff-button--secondary"),
    ]
    assert "Accept anyway: nothing arrived in this asset" in page


def test_accepting_on_the_payment_page_pays_the_order_and_a_missing_reason_decides_nothing(
    late_payment, reviewer, client
):
    # Given a late payment and a reviewer on its page
    payment = payment_of(late_payment)
    client.login(username="rita", password=STAFF_PASSWORD)
    decide = f"{PAYMENTS_ADMIN}{payment.pk}/decide/"

    # When they press "accept" without a reason, nothing is decided and the page says why
    refused = client.post(decide, {"decision": "accept", "reason": "  "}, follow=True)
    assert "A reason is required for every decision." in text(refused)
    assert (payment_of(late_payment).status, PaymentEvent.objects.filter(actor="reviewer rita").count()) == ("late", 0)

    # When they press "accept" with a reason
    answer = client.post(decide, {"decision": "accept", "reason": "five minutes late, lots still free"})

    # Then they are back on the payment's page, the order is paid and the reason kept
    assert (answer.status_code, answer["Location"]) == (302, f"{PAYMENTS_ADMIN}{payment.pk}/change/")
    assert (payment_of(late_payment).status, order_of(late_payment).status) == ("confirmed", "paid")
    event = payment_of(late_payment).events.last()
    assert (event.actor, event.reason) == ("reviewer rita", "five minutes late, lots still free")
    # And the page offers no decision any more
    page = client.get(f"{PAYMENTS_ADMIN}{payment.pk}/change/").content.decode()
    assert 'name="decision"' not in page


def test_rejecting_on_the_payment_page_cancels_the_order(late_payment, reviewer, client):
    payment = payment_of(late_payment)
    client.login(username="rita", password=STAFF_PASSWORD)

    answer = client.post(f"{PAYMENTS_ADMIN}{payment.pk}/decide/", {"decision": "reject", "reason": "lots are gone"})

    assert answer.status_code == 302
    assert (payment_of(late_payment).status, order_of(late_payment).status) == ("rejected", "cancelled")


def test_an_operator_cannot_decide_on_the_payment_page(late_payment, operator, client):
    payment = payment_of(late_payment)
    client.login(username="olga", password=STAFF_PASSWORD)

    answer = client.post(f"{PAYMENTS_ADMIN}{payment.pk}/decide/", {"decision": "accept", "reason": "looks fine"})

    assert answer.status_code == 403
    assert payment_of(late_payment).status == "late"
    # The refusal names who can act, instead of a bare 403
    assert "Payment reviewers" in text(answer)


def test_the_admin_start_page_shows_the_reviewers_queue_with_counts_oldest_first(
    chain, customer, scan_pass, reviewer, client
):
    # Given two late payments (the second one older) and a payment that needs nothing
    first, second = customer.order(), customer.order()
    for placed, minutes in ((first, 5), (second, 50)):
        payment = payment_of(placed)
        payment.expires_at = timezone.now() - dt.timedelta(minutes=minutes)
        payment.save(update_fields=["expires_at"])
        chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    paid = pay(chain, customer, scan_pass)
    from orders.models import OrderEvent

    OrderEvent.objects.filter(order=order_of(second), to_status="needs_review").update(
        created_at=timezone.now() - dt.timedelta(hours=3)
    )
    client.login(username="rita", password=STAFF_PASSWORD)

    # When the reviewer opens the admin's start page
    page = client.get("/admin/")

    # Then the queue counts the payments in review and lists them oldest first, each linking to its page
    assert page.status_code == 200
    html = page.content.decode()
    queue = html.split('id="staff-queue"', 1)[1].split("</section>", 1)[0]
    assert re.search(r"Payments in review\s*<span[^>]*>\s*2\s*</span>", queue)
    links = re.findall(r'href="(/admin/payments/paymentrequest/\d+/change/)"', queue)
    assert links == [f"{PAYMENTS_ADMIN}{payment_of(p).pk}/change/" for p in (second, first)]
    assert paid["reference"] not in queue
    assert "Refunds to approve" in queue
    assert usdc(units(first)) in text(page)
    # And it links the whole list, filtered on what needs review, and the ledger
    assert f"{PAYMENTS_ADMIN}?review=waiting" in queue
    assert 'href="/admin/ledger/"' in html


def test_an_operators_start_page_lists_their_own_work_not_the_reviewers(chain, customer, scan_pass, operator, client):
    # Given a paid order (the operator's) and a late payment (a reviewer's)
    paid = pay(chain, customer, scan_pass)
    client.login(username="olga", password=STAFF_PASSWORD)

    # When the operator opens the admin's start page
    html = client.get("/admin/").content.decode()

    # Then their queue shows the paid order, linking to the console, and not the ledger
    queue = html.split('id="staff-queue"', 1)[1].split("</section>", 1)[0]
    assert paid["reference"] in queue and 'href="/ops/#waiting-title"' in queue
    assert "Payments in review" not in queue
    assert 'href="/admin/ledger/"' not in html


def test_an_extensions_payment_in_review_is_counted_apart_and_opens_on_its_page(chain, customer, scan_pass, client):
    from tests.payments.verification.helpers import extend, paid_in_usdc, rental_active, settle_rounds
    from tests.staff import add_staff

    # Given an active rental whose 3-day extension was paid in USDT instead of USDC: the extension is in review
    placed = paid_in_usdc(chain, customer, scan_pass)
    rental_active(placed)
    extension = extend(customer, placed, duration_days=3).json()
    chain.wallet.pay_token(chain.usdt, extension["payment"]["address"], 3_000_000)
    settle_rounds(chain, scan_pass)
    add_staff("rita", "reviewer")
    client.login(username="rita", password=STAFF_PASSWORD)

    # When the reviewer opens the admin's start page
    html = client.get("/admin/").content.decode()

    # Then the extension's payment is counted apart from the orders' payments, and links to its page
    queue = html.split('id="staff-queue"', 1)[1].split("</section>", 1)[0]
    assert re.search(r"Extension payments in review\s*<span[^>]*>\s*1\s*</span>", queue)
    assert re.search(r"Payments in review\s*<span[^>]*>\s*0\s*</span>", queue)
    payment = PaymentRequest.objects.get(extension_id=extension["id"])
    assert f'href="{PAYMENTS_ADMIN}{payment.pk}/change/"' in queue
    assert "also 3.00 USDT on local" in queue
    # And its page offers the decisions, the evidence naming what came in the other asset
    page = client.get(f"{PAYMENTS_ADMIN}{payment.pk}/change/")
    assert "3.00 USDT on local" in text(page) and 'value="accept"' in page.content.decode()


@pytest.mark.parametrize(
    ("language", "accept", "column"),
    [("es", "Aceptar el pago (el pedido queda pagado)", "importe"), ("fr", "Accepter le paiement", "montant")],
)
def test_a_reviewer_reads_the_payment_list_s_actions_and_columns_in_their_language(
    late_payment, reviewer, client, language, accept, column
):
    # Given a reviewer whose browser asks for Spanish or French
    client.login(username="rita", password=STAFF_PASSWORD)

    # When they open the list of payments
    listing = client.get(PAYMENTS_ADMIN, headers={"Accept-Language": language})

    # Then the actions they pick from and the columns they read are in that language
    assert listing.status_code == 200
    assert accept in text(listing) and column in text(listing).lower()
    assert "Accept the payment" not in text(listing)

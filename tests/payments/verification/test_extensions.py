"""Extending an active rental: its own payment request, paid on-chain like the order, applied once confirmed;
refused (409) for an order that is not active; money that comes after the rental ended goes back."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from orders.extensions import extensions_expire_overdue
from orders.models import Duration, Extension, ExtensionEvent, Order
from orders.outbox import email_enqueue
from payments.models import Notice, PaymentRequest, Refund
from payments.review import Decision, ReviewError, payment_review_decide
from tests.payments.verification.helpers import ORDERS_URL, units
from tests.payments.verification.helpers import extend as _extend
from tests.payments.verification.helpers import paid_in_usdc as _paid_order
from tests.payments.verification.helpers import rental_active as _active
from tests.payments.verification.helpers import settle_rounds as _settle_rounds


def test_a_paid_extension_moves_the_end_of_an_active_rental_by_its_days(chain, customer, scan_pass, mailoutbox):
    # Given an active rental of one lot paid in USDC
    placed = _paid_order(chain, customer, scan_pass)
    order = _active(placed)
    ends_before = order.ends_at
    mailoutbox.clear()

    # When the customer asks for 7 more days
    response = _extend(customer, placed, duration_days=7)

    # Then the extension is opened with a payment request of its own: a new address, the catalog's price
    assert response.status_code == 201, response.content
    extension = response.json()
    assert (extension["duration_days"], extension["status"]) == (7, "awaiting_payment")
    durations = customer.client.get("/api/v1/catalog/").json()["durations"]
    price = Decimal(next(d["price_per_lot_usd"] for d in durations if d["days"] == 7))
    assert Decimal(extension["total_usd"]) == price
    payment = extension["payment"]
    assert (payment["asset"], payment["network"], payment["status"]) == ("USDC", "local", "pending")
    assert payment["address"] != placed["payment"]["address"]
    assert int(payment["amount_base_units"]) == int(price * 10**6)
    # And the order lists it
    assert [e["id"] for e in customer.read(placed)["extensions"]] == [extension["id"]]

    # When the customer pays the extension's address and presses "I have paid"
    sent = chain.wallet.pay_token(chain.usdc, payment["address"], int(payment["amount_base_units"]))
    assert customer.paid(placed, sent.tx_hash).status_code == 202
    seen = customer.read(placed)["extensions"][0]
    assert (seen["status"], seen["payment"]["status"]) == ("payment_reported", "detected")

    # And the transfer becomes final
    _settle_rounds(chain, scan_pass)

    # Then the extension is applied and the rental ends 7 days later, the order still active
    seen = customer.read(placed)
    assert seen["status"] == "active"
    assert (seen["extensions"][0]["status"], seen["extensions"][0]["payment"]["status"]) == ("applied", "confirmed")
    order.refresh_from_db()
    assert order.ends_at == ends_before + dt.timedelta(days=7)
    # And the order's first payment did not move, and the customer was told
    assert seen["payment"]["status"] == "confirmed"
    assert f"Order {placed['reference']}: rental extended by 7 days" in [m.subject for m in mailoutbox]
    assert [(e.from_status, e.to_status) for e in ExtensionEvent.objects.filter(extension_id=extension["id"])] == [
        ("", "awaiting_payment"),
        ("awaiting_payment", "payment_reported"),
        ("payment_reported", "applied"),
    ]
    # And the receipt lists the extension, what it cost and the transfer that paid it, after the rental itself
    status_path = "/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1]
    receipt = customer.client.get(f"{status_path}receipt/")
    extensions = receipt.content.decode().split('id="extensions-title"', 1)[-1].split("</section>", 1)[0]
    assert receipt.status_code == 200 and "Extensions" in extensions and "7 more days" in extensions
    assert sent.tx_hash.lower() in extensions.lower() and f"{price:,.2f} USD" in extensions


def test_an_order_that_is_not_active_cannot_be_extended(chain, customer, scan_pass):
    # Given an order still awaiting its payment, and one paid but not handed over yet
    waiting = customer.order()
    paid = _paid_order(chain, customer, scan_pass)
    payments = PaymentRequest.objects.count()

    for placed in (waiting, paid):
        # When the customer asks for an extension
        response = _extend(customer, placed, duration_days=3)

        # Then it is refused with a message, and nothing is stored
        assert response.status_code == 409, response.content
        assert "Only an active rental can be extended" in response.json()["detail"]
    assert Extension.objects.count() == 0
    assert PaymentRequest.objects.count() == payments


def test_a_rental_past_its_end_cannot_be_extended(chain, customer, scan_pass):
    placed = _paid_order(chain, customer, scan_pass)
    _active(placed, ends_in=-dt.timedelta(minutes=1))
    response = _extend(customer, placed, duration_days=3)
    assert response.status_code == 409
    assert response.json()["detail"] == "This rental has ended: it can no longer be extended."
    assert Extension.objects.count() == 0


def test_another_orders_token_extends_nothing(chain, customer, scan_pass):
    # Given two active rentals
    mine, other = _paid_order(chain, customer, scan_pass), _paid_order(chain, customer, scan_pass)
    _active(mine)
    _active(other)

    # When one is asked for with the other's token, or none
    response = _extend(customer, mine, token=other["access_token"], duration_days=3)
    anonymous = customer.client.post(
        f"{ORDERS_URL}{mine['reference']}/extend/", {"duration_days": 3}, content_type="application/json"
    )

    # Then it is not found, and nothing is stored
    assert (response.status_code, anonymous.status_code) == (404, 404)
    assert Extension.objects.count() == 0


def test_a_duration_not_in_the_catalog_is_refused_on_its_field(chain, customer, scan_pass):
    placed = _paid_order(chain, customer, scan_pass)
    _active(placed)
    for days in (5, 0, -3, "seven"):
        response = _extend(customer, placed, duration_days=days)
        assert response.status_code == 400, response.content
        assert "duration_days" in response.json()
    assert _extend(customer, placed, duration_days=3, network="local", asset="DOGE").status_code == 400
    assert Extension.objects.count() == 0


def test_an_extension_whose_price_moved_since_the_customer_saw_it_is_refused_with_the_price_of_now(
    chain, customer, scan_pass
):
    # Given an active rental of one lot, and a 3-day price raised after the customer read it
    placed = _paid_order(chain, customer, scan_pass)
    _active(placed)
    three = Duration.objects.get(days=3)
    seen = three.price_per_lot_usd
    Duration.objects.filter(pk=three.pk).update(price_per_lot_usd=seen + 100)

    # When the script extends with the total it saw
    refused = _extend(customer, placed, duration_days=3, expected_total_usd=str(seen))

    # Then it is refused with the price of now, and nothing is opened
    assert refused.status_code == 409, refused.content
    body = refused.json()
    assert (body["code"], body["total_usd"]) == ("price_changed", f"{seen + 100:.2f}")
    assert body["request_id"] == refused["X-Request-ID"]
    assert Extension.objects.count() == 0
    # And with the price of now it goes through
    assert _extend(customer, placed, duration_days=3, expected_total_usd=body["total_usd"]).status_code == 201


def test_an_extension_paid_after_the_rental_ended_goes_to_review_and_its_money_back(chain, customer, scan_pass):
    # Given an active rental and an extension opened before its end
    placed = _paid_order(chain, customer, scan_pass)
    order = _active(placed, ends_in=dt.timedelta(minutes=20))
    extension = _extend(customer, placed, duration_days=3).json()
    # And the rental ends before the money arrives
    ended_at = timezone.now() - dt.timedelta(seconds=1)
    Order.objects.filter(pk=order.pk).update(ends_at=ended_at)

    # When the extension's payment arrives in full and becomes final
    amount = int(extension["payment"]["amount_base_units"])
    chain.wallet.pay_token(chain.usdc, extension["payment"]["address"], amount)
    _settle_rounds(chain, scan_pass)

    # Then the extension waits for a reviewer, the rental's end does not move
    seen = customer.read(placed)
    assert seen["extensions"][0]["status"] == "needs_review"
    order.refresh_from_db()
    assert order.ends_at == ended_at
    # And all of the money is due back as late
    refunds = [(r["reason"], r["asset"], r["amount_base_units"]) for r in seen["refunds"]]
    assert refunds == [("late", "USDC", str(amount))]
    assert Refund.objects.get().payment.extension_id == extension["id"]


def test_the_first_payments_amount_in_another_asset_applies_no_extension(chain, customer, scan_pass):
    # Given an active rental paid in USDC and a 3-day extension asked for in USDC
    placed = _paid_order(chain, customer, scan_pass)
    order = _active(placed)
    ends_before = order.ends_at
    extension = _extend(customer, placed, duration_days=3).json()

    # When the customer sends the first payment's amount in USDT to the extension's address
    chain.wallet.pay_token(chain.usdt, extension["payment"]["address"], units(placed))
    _settle_rounds(chain, scan_pass)

    # Then the extension goes to a reviewer, the end does not move, and the USDT is due back
    seen = customer.read(placed)
    assert (seen["extensions"][0]["status"], seen["extensions"][0]["payment"]["status"]) == (
        "needs_review",
        "wrong_network",
    )
    order.refresh_from_db()
    assert order.ends_at == ends_before
    assert [(r["reason"], r["asset"]) for r in seen["refunds"]] == [("wrong_asset", "USDT")]


def test_pressing_i_have_paid_twice_on_an_extension_is_harmless(chain, customer, scan_pass):
    # Given an active rental with an extension awaiting its payment
    placed = _paid_order(chain, customer, scan_pass)
    _active(placed)
    extension = _extend(customer, placed, duration_days=3).json()

    # When the customer presses "I have paid" twice without paying
    first, second = customer.paid(placed), customer.paid(placed)

    # Then both are accepted, the extension is reported once, and the order stays active
    assert (first.status_code, second.status_code) == (202, 202)
    seen = customer.read(placed)
    assert (seen["status"], seen["extensions"][0]["status"]) == ("active", "payment_reported")
    moves = ExtensionEvent.objects.filter(extension_id=extension["id"], to_status="payment_reported")
    assert moves.count() == 1
    assert Notice.objects.filter(payment__extension_id=extension["id"]).count() == 2


def test_an_unpaid_extension_expires_with_its_payment_window(chain, customer, scan_pass):
    placed = _paid_order(chain, customer, scan_pass)
    _active(placed)
    extension = _extend(customer, placed, duration_days=30).json()
    deadline = PaymentRequest.objects.get(extension_id=extension["id"]).expires_at

    assert extensions_expire_overdue(now=deadline - dt.timedelta(seconds=1)) == 0
    assert extensions_expire_overdue(now=deadline + dt.timedelta(seconds=1)) == 1
    assert extensions_expire_overdue(now=deadline + dt.timedelta(seconds=2)) == 0  # once

    seen = customer.read(placed)
    assert (seen["status"], seen["extensions"][0]["status"]) == ("active", "expired")


def test_the_order_page_of_an_active_rental_has_an_extend_form_and_shows_the_extensions_payment(
    chain, customer, scan_pass
):
    # Given an active rental paid in USDC
    placed = _paid_order(chain, customer, scan_pass)
    _active(placed)
    page_url = "/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1]
    page = customer.client.get(page_url).content.decode()
    assert 'id="extend"' in page and f"{page_url}extend/" in page

    # When the customer extends it by 3 days in USDT from the page
    with customer.capture(execute=True):
        response = customer.client.post(f"{page_url}extend/", {"duration_days": 3, "payment_option": "local:USDT"})

    # Then they are sent back to the page, which shows the extension's own payment panel
    extension = Extension.objects.get()
    assert response.status_code == 302
    assert response["Location"].endswith(f"#extension-{extension.pk}")
    page = customer.client.get(page_url).content.decode()
    payment = extension.payment
    assert payment.asset.symbol == "USDT"
    assert payment.address in page and str(payment.amount) in page
    assert 'id="extension-' in page and "/paid/" in page

    # And an asset not offered is refused on its field, with nothing stored
    refused = customer.client.post(f"{page_url}extend/", {"duration_days": 3, "payment_option": "local:DOGE"})
    assert refused.status_code == 400
    assert "Choose one of the listed assets and networks." in refused.content.decode()
    assert Extension.objects.count() == 1


def test_an_order_that_is_not_active_has_no_extend_form_and_its_post_is_refused_with_a_message(customer, chain):
    placed = customer.order()
    page_url = "/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1]
    assert 'id="extend"' not in customer.client.get(page_url).content.decode()
    asked = {"duration_days": 3, "payment_option": "local:USDC"}
    response = customer.client.post(f"{page_url}extend/", asked, follow=True)
    assert "Only an active rental can be extended" in response.content.decode()
    assert Extension.objects.count() == 0


def test_the_reminder_before_the_end_links_to_the_extend_form(chain, customer, scan_pass, mailoutbox):
    placed = _paid_order(chain, customer, scan_pass)
    order = _active(placed, ends_in=dt.timedelta(hours=20))
    mailoutbox.clear()
    with customer.capture(execute=True), transaction.atomic():
        email_enqueue(order_id=order.pk, name="access_ending", params={"hours": 24})
    path = "/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1]
    (email,) = mailoutbox
    assert f"{path}#extend" in email.body
    assert f"{path}#extend" in email.alternatives[0][0]


def test_a_reviewer_cannot_accept_an_extensions_money_once_the_rental_is_over(chain, customer, scan_pass):
    # Given an extension whose payment arrived after the rental ended (it waits for a reviewer)
    placed = _paid_order(chain, customer, scan_pass)
    order = _active(placed, ends_in=dt.timedelta(minutes=20))
    extension = _extend(customer, placed, duration_days=3).json()
    Order.objects.filter(pk=order.pk).update(ends_at=timezone.now() - dt.timedelta(seconds=1))
    chain.wallet.pay_token(chain.usdc, extension["payment"]["address"], int(extension["payment"]["amount_base_units"]))
    _settle_rounds(chain, scan_pass)
    payment = PaymentRequest.objects.get(extension_id=extension["id"])

    # When a reviewer tries to accept it, it is refused; rejecting it expires the extension
    with pytest.raises(ReviewError, match="Reject it to refund it"):
        payment_review_decide(payment_id=payment.pk, decision=Decision.ACCEPT, reason="looks fine", reviewer="rita")
    payment_review_decide(payment_id=payment.pk, decision=Decision.REJECT, reason="too late", reviewer="rita")

    # Then the extension expired, the order is still active, and the money is due back
    assert Extension.objects.get(pk=extension["id"]).status == "expired"
    assert Order.objects.get(pk=order.pk).status == "active"
    assert Refund.objects.filter(payment=payment).exclude(status="rejected").count() == 1

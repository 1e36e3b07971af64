"""Refunds, opened by the money itself, given an address by the customer, decided by a reviewer: every amount
exact in the asset it arrived in, on a real chain (anvil) with real tokens.

The attacker's cases come first: addresses that would lose the money or send it back to the shop, a refund of
another order, a customer or an operator trying a reviewer's decision.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.core import mail
from django.utils import timezone

from orders.models import Reservation
from orders.orders import orders_expire_overdue
from payments.models import PaymentRequest, Refund, RefundStatus
from payments.review import Decision, ReviewError, payment_review_decide
from payments.treasury import gas_account_address
from tests.payments.verification.helpers import order_of, payment_of, units
from tests.payments.verification.money_out import (
    CUSTOMER_WALLET,
    EXCESS,
    TREASURY,
    decide,
    give_address,
    overpaid,
    staff,
)
from tests.placing import order_posted


def test_an_overpayment_opens_a_refund_of_the_exact_excess_the_customer_gives_an_address_and_a_reviewer_approves(
    chain, customer, scan_pass, client
):
    # Given an order overpaid by 2.5 USDC, final
    placed, refund = overpaid(chain, customer, scan_pass)

    # Then a refund of exactly the excess is open, waiting for the customer's address, and they are emailed
    assert (refund.reason, refund.status, int(refund.amount_base_units), refund.symbol) == (
        "overpaid",
        "awaiting_address",
        EXCESS,
        "USDC",
    )
    assert f"Order {placed['reference']}: a refund is due to you" in [m.subject for m in mail.outbox]
    shown = customer.read(placed)["refunds"]
    assert shown == [
        {
            "id": refund.pk,
            "reason": "overpaid",
            "asset": "USDC",
            "contract": chain.usdc,
            "network": "local",
            "amount_base_units": str(EXCESS),
            "amount": "2.5",
            "to_address": None,
            "status": "awaiting_address",
            "tx_hash": None,
        }
    ]

    # When the customer gives their address, and a reviewer approves through the API
    answer = give_address(client, placed, refund.pk, CUSTOMER_WALLET)
    assert answer.status_code == 200, answer.content
    assert (answer.json()["status"], answer.json()["to_address"]) == ("pending_approval", CUSTOMER_WALLET)
    approved = decide(client, refund.pk, "approve", staff("reviewer", "rita"))

    # Then the refund is approved, its history says who did what, and its address can no longer change
    assert approved.status_code == 200, approved.content
    assert approved.json() == {"id": refund.pk, "status": "approved"}
    steps = [(e.from_status, e.to_status, e.actor) for e in refund.events.all()]
    assert steps == [
        ("", "awaiting_address", "system"),
        ("awaiting_address", "pending_approval", "customer"),
        ("pending_approval", "approved", "reviewer rita"),
    ]
    again = give_address(client, placed, refund.pk, "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB")
    assert again.status_code == 400 and "can no longer change" in again.json()["address"][0]
    assert Refund.objects.get(pk=refund.pk).to_address == CUSTOMER_WALLET


def test_a_refund_address_that_would_lose_the_money_or_return_it_to_the_shop_is_refused_on_its_field(
    chain, customer, scan_pass, client, settings
):
    settings.TREASURY_ADDRESS = TREASURY
    placed, refund = overpaid(chain, customer, scan_pass)
    another = customer.order()
    cases = {
        "not an address": ("0x1234", "0x followed by 40"),
        "no checksum (all lower case)": (CUSTOMER_WALLET.lower(), "checksummed form"),
        "a wrong checksum (one capital changed)": (CUSTOMER_WALLET.replace("E7", "e7"), "checksummed form"),
        "the zero address": ("0x" + "0" * 40, "zero address"),
        "a token contract": (chain.usdc, "token contract"),
        "this order's own deposit address": (placed["payment"]["address"], "deposit addresses"),
        "another order's deposit address": (another["payment"]["address"], "deposit addresses"),
        "the shop's treasury": (TREASURY, "treasury"),
        "the shop's gas account": (gas_account_address(), "gas account"),
    }
    for case, (address, message) in cases.items():
        answer = give_address(client, placed, refund.pk, address)
        assert answer.status_code == 400, case
        assert message in answer.json()["address"][0], (case, answer.json())
    refund.refresh_from_db()
    assert (refund.status, refund.to_address) == ("awaiting_address", "")  # nothing half-stored
    assert refund.events.count() == 1


def test_a_refund_is_reached_only_with_its_own_orders_token_and_decided_only_by_a_payment_reviewer(
    chain, customer, scan_pass, client
):
    placed, refund = overpaid(chain, customer, scan_pass)
    another = customer.order()
    # Another order's token, or a refund id of another order: 404, nothing changes
    assert give_address(client, placed, refund.pk, CUSTOMER_WALLET, token=another["access_token"]).status_code == 404
    assert give_address(client, another, refund.pk, CUSTOMER_WALLET).status_code == 404
    assert give_address(client, placed, refund.pk, CUSTOMER_WALLET).status_code == 200
    # Anonymous, an operator, a customer's order token: no decision; a reviewer: yes
    assert decide(client, refund.pk, "approve", None).status_code in (401, 403)
    assert decide(client, refund.pk, "approve", staff("operator", "olga")).status_code == 403
    reviewer = staff("reviewer", "rita")
    assert decide(client, refund.pk, "approve", reviewer, reason=" ").status_code == 400
    assert Refund.objects.get(pk=refund.pk).status == "pending_approval"
    assert decide(client, refund.pk, "reject", reviewer, reason="the customer asked to keep it as credit").json() == {
        "id": refund.pk,
        "status": "rejected",
    }
    # A rejected refund is final: approving it now is a conflict, said in words
    late = decide(client, refund.pk, "approve", reviewer)
    assert late.status_code == 409 and "waiting for approval" in late.json()["detail"]


def test_a_refund_follows_the_chain_until_it_is_approved_then_more_money_opens_another(
    chain, customer, scan_pass, client
):
    placed, refund = overpaid(chain, customer, scan_pass)
    # More arrives while it is open: the same refund grows, exactly
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], 1_000_000)
    chain.mine(1)
    scan_pass()
    refund.refresh_from_db()
    assert int(refund.amount_base_units) == EXCESS + 1_000_000
    give_address(client, placed, refund.pk, CUSTOMER_WALLET)
    assert decide(client, refund.pk, "approve", staff("reviewer", "rita")).status_code == 200
    # More arrives after the approval: the approved amount stays, a new refund opens for the difference
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], 700_000)
    chain.mine(1)
    scan_pass()
    rows = list(Refund.objects.filter(payment=payment_of(placed)).values_list("status", "amount_base_units"))
    assert [(status, int(amount)) for status, amount in rows] == [
        ("approved", EXCESS + 1_000_000),
        ("awaiting_address", 700_000),
    ]


def test_money_in_a_token_the_order_does_not_use_is_refunded_in_that_token_exactly(chain, customer, scan_pass):
    # Given a USDC order paid in full, and 3.000001 USDT (another token) sent to its address too
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.wallet.pay_token(chain.usdt, placed["payment"]["address"], 3_000_001)
    chain.mine(1)
    scan_pass()

    # Then the USDT comes back as USDT, to the base unit; nothing is added to the USDC
    (refund,) = Refund.objects.filter(payment=payment_of(placed))
    assert (refund.reason, refund.symbol, refund.token_contract.lower(), int(refund.amount_base_units)) == (
        "wrong_asset",
        "USDT",
        chain.usdt.lower(),
        3_000_001,
    )


def test_a_rejected_payment_refunds_everything_that_arrived_as_a_cancellation(chain, customer, scan_pass):
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) - 1)  # underpaid by one unit
    chain.mine(1)
    scan_pass()
    assert not Refund.objects.exists()

    payment_review_decide(
        payment_id=payment_of(placed).pk, decision=Decision.REJECT, reason="the customer cancelled", reviewer="rita"
    )

    (refund,) = Refund.objects.filter(payment=payment_of(placed))
    assert (refund.reason, int(refund.amount_base_units), refund.status) == (
        "cancelled",
        units(placed) - 1,
        RefundStatus.AWAITING_ADDRESS,
    )


def test_the_order_page_takes_the_refund_address_and_shows_a_refused_one_on_its_field(
    chain, customer, scan_pass, client
):
    placed, refund = overpaid(chain, customer, scan_pass)
    page = placed["status_url"].split("testserver", 1)[-1]
    action = f"{page}refunds/{refund.pk}/address/"
    assert f'action="{action}"' in client.get(page).content.decode()

    refused = client.post(action, {"address": "0x" + "0" * 40})
    assert refused.status_code == 400
    body = refused.content.decode()
    assert 'aria-invalid="true"' in body and "The zero address burns what is sent to it" in body

    taken = client.post(action, {"address": CUSTOMER_WALLET}, follow=True)
    body = taken.content.decode()
    assert "Thank you: a reviewer approves the refund" in body
    assert CUSTOMER_WALLET in body and "Waiting for a reviewer&#x27;s approval" in body


@pytest.mark.parametrize("verb", ["approve", "reject"])
def test_a_refund_that_does_not_exist_is_a_plain_404_for_a_reviewer(db, client, verb):
    assert decide(client, 999_999, verb, staff("reviewer", "rita")).status_code == 404


def test_dust_opens_no_refund_and_a_token_the_shop_does_not_sell_waits_for_a_reviewer(
    chain, customer, scan_pass, foreign_token
):
    # Given a paid USDC order that also received 0.5 USDT (under REFUND_MIN_USD) and 7 units of a stranger's
    # 18-decimal token
    placed = customer.order()
    address = placed["payment"]["address"]
    chain.wallet.pay_token(chain.usdc, address, units(placed))
    chain.wallet.pay_token(chain.usdt, address, 500_000)
    chain.wallet.pay_token(foreign_token, address, 7 * 10**18)
    chain.mine(2)
    scan_pass()

    # Then nothing opens by itself: no refund, no email to the customer about one
    assert not Refund.objects.exists()
    assert not [m for m in mail.outbox if "refund" in m.subject]

    # When a reviewer marks the payment for refund, each asset opens on its own, the stranger's token in its own
    # base units (its decimals unknown)
    payment_review_decide(payment_id=payment_of(placed).pk, decision=Decision.REFUND, reason="asked", reviewer="rita")
    opened = {(r.symbol, r.token_contract.lower(), int(r.amount_base_units), r.decimals) for r in Refund.objects.all()}
    assert opened == {("USDT", chain.usdt.lower(), 500_000, 6), ("", foreign_token.lower(), 7 * 10**18, None)}


def _expired_then_paid_late(chain, customer, scan_pass, *, lots_taken: bool) -> dict:
    """An order whose window ended (its lot released), then, optionally, its lot sold to someone else, then its
    full amount arrives late and becomes final."""
    placed = customer.order()
    past = timezone.now() - dt.timedelta(minutes=1)
    Reservation.objects.filter(order=order_of(placed)).update(expires_at=past)
    PaymentRequest.objects.filter(order=order_of(placed)).update(expires_at=past)
    orders_expire_overdue()
    if lots_taken:  # another customer buys the only node (no node added for them)
        body = {**customer.order_payload, "network": "local", "asset": "USDC"}
        order_posted(customer.client, body)
    mail.outbox.clear()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    return placed


def test_a_late_payment_whose_lots_are_gone_opens_a_refund_of_all_of_it_by_itself(chain, customer, scan_pass):
    # Given an expired order whose only lot was sold to another customer, paid in full after the deadline
    placed = _expired_then_paid_late(chain, customer, scan_pass, lots_taken=True)

    # Then a refund of everything that arrived opens at once, as late, and the customer is asked for an address
    (refund,) = Refund.objects.all()
    assert (refund.reason, refund.status, int(refund.amount_base_units), refund.symbol) == (
        "late",
        "awaiting_address",
        units(placed),
        "USDC",
    )
    assert [m.subject for m in mail.outbox] == [
        f"Order {placed['reference']}: your payment needs attention",
        f"Order {placed['reference']}: a refund is due to you",
    ]
    # And a reviewer still sees the payment: the refund is paid only once they approve it
    assert (payment_of(placed).status, order_of(placed).status) == ("late", "needs_review")


def test_a_late_payment_whose_lots_are_still_free_waits_for_a_reviewer_without_a_refund(chain, customer, scan_pass):
    # Given the same, but nobody bought the lot in between
    placed = _expired_then_paid_late(chain, customer, scan_pass, lots_taken=False)

    # Then nothing is refunded by itself: a reviewer may still accept the money and serve the order
    assert (payment_of(placed).status, Refund.objects.count()) == ("late", 0)
    payment_review_decide(payment_id=payment_of(placed).pk, decision=Decision.ACCEPT, reason="free", reviewer="rita")
    assert (order_of(placed).status, Refund.objects.count()) == ("paid", 0)


def test_late_money_being_refunded_cannot_also_be_accepted(chain, customer, scan_pass, client):
    # Given a late payment whose lots were gone, its refund approved by a reviewer
    placed = _expired_then_paid_late(chain, customer, scan_pass, lots_taken=True)
    (refund,) = Refund.objects.all()
    give_address(client, placed, refund.pk, CUSTOMER_WALLET)
    assert decide(client, refund.pk, "approve", staff("reviewer", "rita")).status_code == 200

    # When a reviewer (another one, or the same later) tries to accept the same money for the order
    with pytest.raises(ReviewError, match="being refunded"):
        payment_review_decide(payment_id=payment_of(placed).pk, decision=Decision.ACCEPT, reason="ok", reviewer="sam")

    # Then the money is not counted twice: the order is not paid and the refund stays owed
    assert (order_of(placed).status, Refund.objects.get().status) == ("needs_review", "approved")


def test_a_late_payment_rejected_by_a_reviewer_is_refunded_in_full_as_late(chain, customer, scan_pass):
    placed = customer.order()
    payment_of(placed).__class__.objects.filter(pk=payment_of(placed).pk).update(
        expires_at=timezone.now() - dt.timedelta(minutes=5)
    )
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    assert payment_of(placed).status == "late" and not Refund.objects.exists()

    payment_review_decide(
        payment_id=payment_of(placed).pk, decision=Decision.REJECT, reason="the lots are gone", reviewer="rita"
    )

    (refund,) = Refund.objects.all()
    assert (refund.reason, int(refund.amount_base_units)) == ("late", units(placed))


def test_a_reviewer_opens_a_goodwill_refund_in_the_payments_own_asset(chain, customer, scan_pass):
    from payments.refunds import refund_goodwill_open

    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    with pytest.raises(ValueError):
        refund_goodwill_open(payment_id=payment_of(placed).pk, amount_base_units=1_000_000, reviewer="rita", reason="")

    refund = refund_goodwill_open(
        payment_id=payment_of(placed).pk, amount_base_units=1_000_000, reviewer="rita", reason="a slow hand-over"
    )

    assert (refund.reason, refund.symbol, int(refund.amount_base_units), refund.status) == (
        "goodwill",
        "USDC",
        1_000_000,
        "awaiting_address",
    )
    # A goodwill refund is the reviewer's, not the chain's: the next settlement leaves it as it is
    scan_pass()
    assert Refund.objects.get(pk=refund.pk).status == "awaiting_address"


def test_a_goodwill_refund_is_never_more_than_the_address_still_has_to_give(chain, customer, scan_pass, client):
    from payments.refunds import refund_goodwill_open

    # Given an order paid exactly, 1 USDC of it already promised back as goodwill
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    payment_id = payment_of(placed).pk
    refund_goodwill_open(payment_id=payment_id, amount_base_units=1_000_000, reviewer="rita", reason="slow")

    # When a reviewer opens another goodwill refund of more than the rest that arrived
    with pytest.raises(ValueError, match="at most 1989 USDC"):
        refund_goodwill_open(payment_id=payment_id, amount_base_units=units(placed), reviewer="sam", reason="very slow")

    # Or through the admin's action: an error on the amount field, not a server error
    from django.contrib.auth import get_user_model

    staff("reviewer", "rita")
    client.force_login(get_user_model().objects.get(username="rita"))
    page = client.post(
        "/admin/payments/paymentrequest/",
        {"action": "goodwill_refund", "_selected_action": [payment_id], "amount": "1990", "reason": "very slow"},
        follow=True,
    )
    assert page.status_code == 200 and "A goodwill refund is at most 1989 USDC" in page.content.decode()
    assert 'id="id_amount_error"' in page.content.decode() and 'aria-invalid="true"' in page.content.decode()

    # Then nothing is opened: money that never arrived, or is promised already, is not promised twice
    assert Refund.objects.count() == 1
    # And the rest, exactly, can still be given
    refund_goodwill_open(payment_id=payment_id, amount_base_units=units(placed) - 1_000_000, reviewer="sam", reason="x")
    assert Refund.objects.count() == 2


def test_a_paid_order_cancelled_in_the_admin_refunds_everything_that_arrived(chain, customer, scan_pass, client):
    from django.contrib.auth import get_user_model

    from orders.models import Order

    # Given a paid order (exactly), and an unpaid one
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    unpaid = customer.order()
    assert not Refund.objects.exists()
    admin = get_user_model().objects.create_superuser("ada", "ada@example.org", "a-long-admin-password")
    client.force_login(admin)

    # When staff cancel both in the admin
    orders = Order.objects.filter(reference__in=[placed["reference"], unpaid["reference"]])
    answer = client.post(
        "/admin/orders/order/", {"action": "cancel_orders", "_selected_action": [o.pk for o in orders]}, follow=True
    )

    # Then both are cancelled, and the paid one's money is due back in full, as a cancellation
    assert answer.status_code == 200
    assert set(Order.objects.filter(pk__in=orders).values_list("status", flat=True)) == {"cancelled"}
    (refund,) = Refund.objects.all()
    assert (refund.payment.order.reference, refund.reason, int(refund.amount_base_units)) == (
        placed["reference"],
        "cancelled",
        units(placed),
    )
    assert payment_of(placed).events.last().reason.startswith("refund of everything: order cancelled")

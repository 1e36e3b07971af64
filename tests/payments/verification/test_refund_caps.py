"""Refunds never promise more than arrived: per asset, the open and owed refunds of a payment are at most what
arrived in it less what already left (refunds paid, sweeps to the treasury, unexpected outflows). On a real
chain (anvil) with real tokens, the cancellation through the admin, the goodwill refund as a reviewer opens it.

The attacker's cases: a goodwill refund then a cancellation (each alone within what arrived, both together
twice it), the same racing from several connections, and a cancellation after the money was swept away.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from payments.models import PaymentEvent, Refund, RefundStatus
from payments.refunds import refund_goodwill_open
from shop.cancellation import order_cancel_with_refunds
from tests.payments.test_capacity_race import run_together
from tests.payments.verification.deposit_keys import (  # noqa: F401 - known_keys: an autouse fixture
    TREASURY,
    deposit_wallet,
    known_keys,
    paid,
)
from tests.payments.verification.helpers import order_of, payment_of, units

race = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def promised(placed: dict, customer) -> list[tuple[str, int]]:
    """(reason, amount) of every refund the customer's order API shows that is not rejected."""
    return [
        (refund["reason"], int(refund["amount_base_units"]))
        for refund in customer.read(placed)["refunds"]
        if refund["status"] != RefundStatus.REJECTED
    ]


def cancel_in_admin(client, placed: dict):
    admin = get_user_model().objects.filter(username="ada").first() or get_user_model().objects.create_superuser(
        "ada", "ada@example.org", "a-long-admin-password"
    )
    client.force_login(admin)
    return client.post(
        "/admin/orders/order/", {"action": "cancel_orders", "_selected_action": [order_of(placed).pk]}, follow=True
    )


def test_a_goodwill_refund_then_a_cancellation_promise_together_no_more_than_arrived(
    chain, customer, scan_pass, client
):
    # Given an order paid exactly, half of it promised back by a reviewer as goodwill
    placed = paid(chain, customer, scan_pass)
    paid_units = units(placed)
    half = paid_units // 2
    refund_goodwill_open(payment_id=payment_of(placed).pk, amount_base_units=half, reviewer="rita", reason="slow")

    # When staff cancel the order in the admin: everything that arrived goes back
    answer = cancel_in_admin(client, placed)
    assert answer.status_code == 200

    # Then the customer is promised, in all, exactly what arrived: the cancellation adds only the other half
    shown = promised(placed, customer)
    assert shown == [("goodwill", half), ("cancelled", paid_units - half)], shown
    assert sum(amount for _, amount in shown) == paid_units
    # And the order page says the same
    page = client.get(placed["status_url"].split("testserver", 1)[-1]).content.decode()
    assert page.count('class="refund"') == 2  # the goodwill one and the cancellation's, nothing on top


def test_a_cancellation_after_the_money_was_swept_to_the_treasury_promises_nothing_from_the_empty_address(
    chain, customer, scan_pass, client
):
    # Given a paid order whose money the treasurer's signer already swept to the treasury
    placed = paid(chain, customer, scan_pass)
    deposit_wallet(chain, placed).transfer(chain.usdc, TREASURY, units(placed))
    scan_pass()
    assert payment_of(placed).sweeps.count() == 1

    # When staff cancel it
    answer = cancel_in_admin(client, placed)

    # Then no refund is promised from an address that no longer holds the money, and staff are told so
    assert promised(placed, customer) == []
    body = answer.content.decode()
    assert "cancelled" in body and "not promised back" in body and "left the deposit address" in body
    note = PaymentEvent.objects.filter(payment=payment_of(placed)).last().reason
    assert note.startswith("refund of everything: order cancelled") and "not promised back" in note


@race
def test_goodwill_refunds_and_a_cancellation_racing_from_three_connections_never_promise_more_than_arrived(
    chain, customer, scan_pass
):
    # Given an order paid exactly
    placed = paid(chain, customer, scan_pass)
    paid_units, payment_id = units(placed), payment_of(placed).pk
    big = paid_units * 6 // 10

    # When two reviewers open a goodwill refund of 60% each while staff cancel the order, at the same instant
    def attempt(slot: int):
        if slot == 0:
            return order_cancel_with_refunds(order_id=order_of(placed).pk, actor="staff", reason="asked")
        return refund_goodwill_open(payment_id=payment_id, amount_base_units=big, reviewer=f"r{slot}", reason="late")

    slots = iter(range(3))
    results = run_together(lambda: attempt(next(slots)), contenders=3)

    # Then whatever the order they ran in, what is promised back is at most what arrived
    unexpected = [r for r in results if isinstance(r, Exception) and not isinstance(r, ValueError)]
    assert not unexpected, unexpected
    refused = [r for r in results if isinstance(r, ValueError)]
    assert all("at most" in str(r) for r in refused)
    rows = Refund.objects.filter(payment_id=payment_id).exclude(status=RefundStatus.REJECTED)
    assert sum(int(amount) for amount in rows.values_list("amount_base_units", flat=True)) <= paid_units
    assert rows.filter(reason="goodwill").count() <= 1
    assert sum(amount for _, amount in promised(placed, customer)) <= paid_units

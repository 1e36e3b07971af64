"""Holds end at the payment window's end unless the right asset arrived in full; one unpaid order may not
hold the fleet; a reviewer may extend a hold, with a reason and a new end.

The attack: 1 unit of the wrong token sent to an unpaid order set its holds' end to none until a reviewer
acted, and an unpaid order could take every free lot: together, one stranger's dust made the shop "Sold out"
indefinitely.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from orders.models import Reservation
from orders.orders import OrderInputError, order_hold_extend, orders_expire_overdue
from payments.models import PaymentRequest
from tests.api_answers import error_fields
from tests.payments.verification.helpers import CATALOG_URL, ORDERS_URL, order_of, units


def window_ends(placed: dict) -> None:
    """The payment window ended a minute ago (holds that ended with it too), and beat's expiry pass ran."""
    past = timezone.now() - dt.timedelta(minutes=1)
    window = order_of(placed).payment.expires_at
    PaymentRequest.objects.filter(order=order_of(placed)).update(expires_at=past)
    Reservation.objects.filter(order=order_of(placed), expires_at=window).update(expires_at=past)
    orders_expire_overdue()


def holds(placed: dict) -> list:
    return [hold.expires_at for hold in order_of(placed).reservations.filter(released_at__isnull=True)]


def lots_available(client: Client) -> int:
    return client.get(CATALOG_URL).json()["lots_available"]


def test_one_unit_of_the_wrong_token_no_longer_holds_the_last_lot_forever(chain, customer, scan_pass, client):
    # Given the last free lot, held by an unpaid USDC order
    placed = customer.order()
    deadline = order_of(placed).payment.expires_at

    # When a stranger sends 1 unit of USDT to its address, final, and the order goes to a reviewer
    chain.wallet.pay_token(chain.usdt, placed["payment"]["address"], 1)
    chain.mine(2)
    scan_pass()
    assert customer.read(placed)["status"] == "needs_review"

    # Then its hold still ends with the payment window; and once the window ends the lot is for sale again
    assert holds(placed) == [deadline]
    window_ends(placed)
    assert holds(placed) == []
    assert lots_available(client) == 1


@pytest.mark.parametrize(
    ("share", "held_past_the_window"),
    [("half of the amount", False), ("the full amount", True)],
)
def test_a_transfer_seen_holds_past_the_window_only_for_the_full_amount(
    chain, customer, scan_pass, share, held_past_the_window
):
    # Given an unpaid order
    placed = customer.order()
    amount = units(placed) if share == "the full amount" else units(placed) // 2

    # When that much of the right token is seen, not yet final
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], amount)
    scan_pass()
    assert customer.read(placed)["payment"]["status"] == "detected"

    # Then only the full amount keeps the lot past the window; a part of it keeps the window's end
    assert holds(placed) == ([None] if held_past_the_window else [order_of(placed).payment.expires_at])


def test_an_underpayment_in_review_keeps_the_window_and_a_top_up_in_time_completes_it(chain, customer, scan_pass):
    # Given an order paid 1 USDC short, final: it needs a reviewer
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) - 1_000_000)
    chain.mine(2)
    scan_pass()
    assert customer.read(placed)["status"] == "needs_review"
    assert holds(placed) == [order_of(placed).payment.expires_at]

    # When the customer tops up within the window
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], 1_000_000)
    chain.mine(2)
    scan_pass()

    # Then the order is paid and its lot held without an end
    assert customer.read(placed)["status"] == "paid"
    assert holds(placed) == [None]


def test_a_reviewer_extends_a_hold_with_a_reason_and_a_new_end(chain, customer, scan_pass):
    # Given an order in review, its window about to end
    placed = customer.order()
    chain.wallet.pay_token(chain.usdt, placed["payment"]["address"], units(placed))
    chain.mine(2)
    scan_pass()
    order = order_of(placed)

    # When a reviewer keeps its lot for two more days, saying why
    until = timezone.now() + dt.timedelta(days=2)
    order_hold_extend(order_id=order.pk, until=until, reason="customer is swapping USDT for USDC", actor="rita")

    # Then the hold ends then, the window's end passing changes nothing, and the event says who and why
    window_ends(placed)
    assert holds(placed) == [until]
    event = order.events.last()
    assert (event.from_status, event.to_status, event.actor) == ("needs_review", "needs_review", "rita")
    assert event.reason.endswith("UTC: customer is swapping USDT for USDC")


def test_a_reviewer_can_hold_again_a_lot_that_lapsed_while_it_is_free(chain, customer, scan_pass, client):
    # Given an order in review whose window ended: its lot was released
    placed = customer.order()
    chain.wallet.pay_token(chain.usdt, placed["payment"]["address"], units(placed))
    chain.mine(2)
    scan_pass()
    window_ends(placed)
    assert holds(placed) == [] and lots_available(client) == 1

    # When a reviewer extends its hold
    until = timezone.now() + dt.timedelta(hours=6)
    order_hold_extend(order_id=order_of(placed).pk, until=until, reason="exchange delay", actor="rita")

    # Then the free lot is held for it again, until then
    assert holds(placed) == [until]
    assert lots_available(client) == 0


@pytest.mark.parametrize(
    ("until", "reason", "field"),
    [(dt.timedelta(hours=1), " ", "reason"), (dt.timedelta(hours=-1), "late", "until")],
)
def test_a_hold_extension_needs_a_reason_and_a_future_end(chain, customer, until, reason, field):
    placed = customer.order()
    with pytest.raises(OrderInputError) as refused:
        order_hold_extend(order_id=order_of(placed).pk, until=timezone.now() + until, reason=reason, actor="rita")
    assert refused.value.field == field
    assert holds(placed) == [order_of(placed).payment.expires_at]


@pytest.mark.parametrize(
    ("setting", "fleet", "lots", "accepted"),
    [
        ("50%", 4, 2, True),
        ("50%", 4, 3, False),
        ("50%", 3, 2, True),  # a share is rounded up
        ("50%", 1, 1, True),  # never below one lot
        ("1", 4, 2, False),
        ("100%", 4, 4, True),
    ],
)
def test_one_unpaid_order_may_hold_only_its_share_of_the_fleet(
    chain, client, make_node, order_payload, settings, setting, fleet, lots, accepted
):
    # Given a fleet of free nodes and a cap on what one unpaid order may hold
    settings.MAX_LOTS_PER_UNPAID_ORDER = setting
    for _ in range(fleet):
        make_node()

    # When a customer orders that many lots
    response = client.post(ORDERS_URL, {**order_payload, "lots": lots}, content_type="application/json")

    # Then it is placed within the cap; beyond it the lots field says why and nothing is held
    if accepted:
        assert response.status_code == 201, response.content
        return
    assert response.status_code == 400
    cap = {"50%": 2, "1": 1}[setting]
    assert error_fields(response, "invalid") == {
        "lots": [f"One order can hold at most {cap} lot{'s' if cap > 1 else ''} until it is paid."]
    }
    assert not Reservation.objects.exists() and not PaymentRequest.objects.exists()

"""The order page's story and timeline (shop/order_story.py) and how it writes amounts and addresses
(core/money_text.py): one message per state with its next action, and what a customer checks before sending."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.utils import translation

from core.money_text import address_groups, address_groups_of, amount_l10n
from shop.order_story import NOT_FOUND_AFTER, order_story, order_timeline, payable

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
ADDRESS = "0x52908400098527886E0F7030069857D2E4169EE7"


def payment(status="pending", *, minutes_left=20) -> dict:
    return {"status": status, "expires_at": NOW + dt.timedelta(minutes=minutes_left)}


def refund(*, to_address=None, changeable=True) -> dict:
    return {"id": 7, "to_address": to_address, "address_changeable": changeable}


def story(status, pay, refunds=(), notice_minutes_ago=None):
    notice = None if notice_minutes_ago is None else NOW - dt.timedelta(minutes=notice_minutes_ago)
    return order_story(status, pay, list(refunds), now=NOW, first_notice_at=notice)


def test_an_unpaid_order_in_its_window_lets_the_payment_card_speak():
    assert story("awaiting_payment", payment()) is None
    assert payable("awaiting_payment", payment(), NOW)


def test_after_i_have_paid_the_page_looks_then_asks_to_check_after_a_few_minutes():
    minutes = NOT_FOUND_AFTER.total_seconds() / 60
    assert story("payment_reported", payment(), notice_minutes_ago=1).key == "looking"
    late = story("payment_reported", payment(), notice_minutes_ago=minutes)
    assert (late.key, late.tone, late.action) == ("not_found", "warning", "pay")


def test_the_card_goes_when_the_window_ends_even_before_the_order_expires():
    ended = payment(minutes_left=0)
    assert not payable("awaiting_payment", ended, NOW)
    assert story("awaiting_payment", ended).key == "window_ended"
    assert story("payment_reported", ended, notice_minutes_ago=10).key == "window_ended"


def test_an_expired_order_offers_a_new_order_and_no_timeline():
    expired = story("expired", payment(minutes_left=-60))
    assert (expired.key, expired.action) == ("expired", "new_order")
    assert order_timeline("expired", "pending") is None
    assert not payable("expired", payment(), NOW)


def test_a_refund_waiting_for_its_address_is_the_one_thing_to_do():
    wrong_token = story("needs_review", payment("wrong_network"), [refund()])
    assert (wrong_token.key, wrong_token.action) == ("refund_address", "refund_address")
    # once given, the reviewer's part is what is left
    assert story("needs_review", payment("wrong_network"), [refund(to_address=ADDRESS)]).key == "wrong_network"


def seen(received: int, *, amount: int = 1000, status: str = "detected") -> dict:
    return {**payment(status), "received_base_units": str(received), "amount_base_units": str(amount)}


def test_once_the_whole_amount_is_seen_the_card_gives_way_to_the_progress():
    # Before (issue 40): "Send exactly", the countdown, the QR and "I have paid" stayed until the money was final
    whole = seen(1000)
    assert not payable("payment_reported", whole, NOW) and not payable("awaiting_payment", seen(1200), NOW)
    assert story("payment_reported", whole).key == "detected"


def test_a_shortfall_is_named_when_the_transfer_is_seen_and_the_card_asks_for_the_rest():
    # Before (issue 40): "nothing to do" until finality, then "underpaid"
    part = seen(600)
    told = story("payment_reported", part)
    assert (told.key, told.tone, told.action) == ("detected_short", "warning", "pay")
    assert payable("payment_reported", part, NOW)
    late = {**part, "expires_at": NOW - dt.timedelta(minutes=1)}
    assert story("payment_reported", late).action == "" and not payable("payment_reported", late, NOW)


def test_an_underpaid_order_asks_for_the_rest_while_its_window_is_open():
    assert story("awaiting_payment", payment("underpaid")).action == "pay"
    assert payable("awaiting_payment", payment("underpaid"), NOW)
    assert story("needs_review", payment("underpaid", minutes_left=-5)).action == ""


@pytest.mark.parametrize(
    ("status", "payment_status", "states"),
    [
        ("awaiting_payment", "pending", ["current", "todo", "todo", "todo", "todo", "todo"]),
        ("payment_reported", "detected", ["done", "current", "todo", "todo", "todo", "todo"]),
        ("needs_review", "late", ["done", "failed", "todo", "todo", "todo", "todo"]),
        ("paid", "confirmed", ["done", "done", "done", "current", "todo", "todo"]),
        ("preparation_failed", "confirmed", ["done", "done", "done", "failed", "todo", "todo"]),
        ("active", "confirmed", ["done", "done", "done", "done", "current", "todo"]),
        ("ended", "confirmed", ["done"] * 6),
    ],
)
def test_the_timeline_marks_where_the_order_is(status, payment_status, states):
    steps = order_timeline(status, payment_status)
    assert [s.key for s in steps] == ["seen", "confirmations", "paid", "preparing", "active", "ended"]
    assert [s.state for s in steps] == states


@pytest.mark.parametrize(
    ("language", "value", "places", "shown"),
    [
        ("en", "899.00", None, "899.00"),
        ("fr", "899.00", None, "899,00"),
        ("fr", "1990", 2, "1\xa0990,00"),
        ("es", "0.663334", None, "0,663334"),
        ("en", "12345.000001", None, "12,345.000001"),
    ],
)
def test_amounts_follow_the_page_language_and_keep_every_digit(language, value, places, shown):
    with translation.override(language):
        assert amount_l10n(Decimal(value), places) == shown


def test_an_address_is_shown_whole_in_groups_of_four_with_both_ends_marked():
    groups = address_groups_of(ADDRESS)
    assert groups[0] == "0x" and "".join(groups) == ADDRESS and {len(g) for g in groups[1:]} == {4}
    html = str(address_groups(ADDRESS))
    assert html.count("address__group--end") == 2
    assert re.sub(r"<[^>]+>", "", html) == ADDRESS  # no space between the groups: a selection copies the address
    assert '<span class="address__group address__group--end">5290</span>' in html
    assert '<span class="address__group address__group--end">9EE7</span>' in html
    assert str(address_groups("<script>")) == "&lt;script&gt;"

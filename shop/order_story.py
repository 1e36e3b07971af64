"""What the order page tells the customer: one story per state, with the one thing to do next, and a
timeline read at a glance (payment seen, confirmations, paid, preparing, active, ended).

Plain functions over the page's data (shop/order_view.py), so that the page, its tests and any other view
tell the same story; the template only words it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from orders.models import OrderStatus
from payments.models import PaymentStatus

S, P = OrderStatus, PaymentStatus
UNPAID = (S.AWAITING_PAYMENT, S.PAYMENT_REPORTED)
# After "I have paid", how long "we are looking" stays the story before the page asks the customer to check
# the network and the address: a transfer that is anywhere on the watched chain is seen within a pass or two.
NOT_FOUND_AFTER = dt.timedelta(minutes=5)
# Payment statuses that settle nothing by themselves and leave money a reviewer or a refund must deal with.
EXCEPTIONS = (P.LATE, P.WRONG_NETWORK, P.REJECTED, P.OVERPAID)


@dataclass(frozen=True)
class Story:
    """`key` names the message the template words; `tone` its colour (info, success, warning); `action`
    the one next step: "pay" (the payment card), "refund_address" (the refund form), "refund" (the refund owed),
    "new_order",
    "replace_key" (the "Replace SSH key" form), or ""."""

    key: str
    tone: str
    action: str = ""


def payment_window_open(payment: dict[str, Any], now: dt.datetime) -> bool:
    expires_at: dt.datetime = payment["expires_at"]
    return now < expires_at


def short(payment: dict[str, Any]) -> bool:
    """Money was seen, but less than the quote: what is missing is named as soon as the transfer is seen, before it
    is final (issue 40), and the card asks for that much."""
    if payment["status"] not in (P.DETECTED, P.UNDERPAID):
        return False
    return int(payment.get("received_base_units") or 0) < int(payment.get("amount_base_units") or 0)


def payable(status: str, payment: dict[str, Any], now: dt.datetime) -> bool:
    """Whether the page offers the payment card: an unpaid order whose window is open, or a top-up. Once the whole
    amount is seen the instructions give way to the progress (no second payment is invited while it confirms)."""
    if status not in UNPAID and payment["status"] != P.UNDERPAID:
        return False
    if payment["status"] not in (P.PENDING, P.DETECTED, P.UNDERPAID):
        return False
    if payment["status"] == P.DETECTED and not short(payment):
        return False
    return payment_window_open(payment, now)


def refund_waiting_for_address(refunds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first refund the customer still has to give an address for."""
    return next((r for r in refunds if r["address_changeable"] and not r["to_address"]), None)


# A refund decided or on its way, not confirmed yet: money the shop owes leads an ended order's page until paid.
REFUND_OWED = ("pending_approval", "approved", "sent")


def refund_owed(refunds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first refund the shop still owes (its address given), or None."""
    return next((r for r in refunds if r["status"] in REFUND_OWED and r["to_address"]), None)


def order_story(
    status: str,
    payment: dict[str, Any],
    refunds: list[dict[str, Any]],
    *,
    now: dt.datetime,
    first_notice_at: dt.datetime | None,
    key_refused: bool = False,
) -> Story | None:
    """The one message the page leads with (None: the payment card says it all). `key_refused`: the failed
    preparation stopped on the customer's SSH key (key_was_refused), which they fix themselves."""
    paid_status = payment["status"]
    if refund_waiting_for_address(refunds) and status not in (S.ACTIVE, S.PREPARING):
        return Story("refund_address", "warning", "refund_address")
    if status in (S.EXPIRED, S.CANCELLED) and refund_owed(refunds):
        return Story("refund_owed", "info", "refund")
    if status == S.EXPIRED:
        return Story("expired", "warning", "new_order")
    if status == S.CANCELLED:
        return Story("cancelled", "warning", "new_order")
    if paid_status == P.UNDERPAID and status in (*UNPAID, S.NEEDS_REVIEW):
        return Story("underpaid", "warning", "pay" if payable(status, payment, now) else "")
    if paid_status in EXCEPTIONS and status in (*UNPAID, S.NEEDS_REVIEW):
        return Story(str(paid_status), "warning" if paid_status != P.OVERPAID else "success")
    if status == S.NEEDS_REVIEW:
        return Story("needs_review", "warning")
    if status in UNPAID:
        if paid_status == P.DETECTED and short(payment):
            return Story("detected_short", "warning", "pay" if payable(status, payment, now) else "")
        if paid_status == P.DETECTED:
            return Story("detected", "info")
        if not payment_window_open(payment, now):
            return Story("window_ended", "warning")
        if first_notice_at is not None:
            if now - first_notice_at >= NOT_FOUND_AFTER:
                return Story("not_found", "warning", "pay")
            return Story("looking", "info", "pay")
        return None
    if status == S.PREPARATION_FAILED and key_refused:
        return Story("key_refused", "warning", "replace_key")
    after_payment: dict[str, Story] = {
        S.PAID: Story("paid", "success"),
        S.PREPARING: Story("preparing", "success"),
        S.PREPARATION_FAILED: Story("preparation_failed", "warning"),
        S.ACTIVE: Story("active", "success"),
        S.ENDED: Story("ended", "info"),
    }
    return after_payment.get(status)


def key_was_refused(runs: list[dict[str, Any]]) -> bool:
    """Whether the last run on any node stopped because that node refused the order's SSH key (runs oldest
    first, as the page reads them)."""
    latest = {run["node"]: run["status"] for run in runs}
    return "refused" in latest.values()


@dataclass(frozen=True)
class Step:
    """One step of the timeline: `state` is done, current, failed or todo."""

    key: str
    state: str


TIMELINE = ("seen", "confirmations", "paid", "preparing", "active", "ended")
# The step an order's status stands at, and whether that step failed.
AT: dict[str, str] = {
    S.AWAITING_PAYMENT: "seen",
    S.PAYMENT_REPORTED: "seen",
    S.NEEDS_REVIEW: "confirmations",
    S.PAID: "preparing",  # paid is done: preparation is what comes next
    S.PREPARING: "preparing",
    S.PREPARATION_FAILED: "preparing",
    S.ACTIVE: "active",
    S.ENDED: "ended",
}


def order_timeline(status: str, payment_status: str) -> list[Step] | None:
    """The steps with their states; None for an order that never got paid (expired, cancelled)."""
    at = AT.get(status)
    if at is None:
        return None
    if at == "seen" and payment_status == P.DETECTED:
        at = "confirmations"
    position = TIMELINE.index(at)
    failed = status in (S.PREPARATION_FAILED, S.NEEDS_REVIEW)
    steps = []
    for index, key in enumerate(TIMELINE):
        if index < position or (key == "ended" and status == S.ENDED):
            state = "done"
        elif index == position:
            state = "failed" if failed else "current"
        else:
            state = "todo"
        steps.append(Step(key, state))
    return steps

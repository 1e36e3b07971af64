"""Time given back on a rental: downtime the health probes saw, and staff's adjustments. One writer of the
order's end for credits: each credit is one `RentalCredit` row and moves `Order.ends_at` by its seconds in the
same transaction, under the order's row lock.

Downtime credits are capped per rental by DOWNTIME_CREDIT_CAP_HOURS (the terms page says so): past the cap a
credit is still recorded, with the seconds it could give (0) and the downtime it measured (`asked_seconds`), so
the customer and staff see both. One credit per downtime episode of a node (a unique constraint): a probe or a
task that runs twice credits it once; two nodes of a rental down at the same time give those hours back once.
Staff add or remove time with a reason; removing never puts the end in the past.

`rental_end_moved` is sent inside that transaction (with `order`, `ends_at` and `credit`): provisioning moves
the live grants' end and the nodes' key backstop with it, as for an extension.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.dispatch import Signal
from django.utils import timezone

from orders import credit_lines  # noqa: F401  registers the "time_adjusted" email with the outbox
from orders.models import CreditKind, Order, OrderStatus, RentalCredit
from orders.orders import order_note
from orders.outbox import email_enqueue

rental_end_moved = Signal()
# A staff adjustment moves the end by at most this much at once (a typo of minutes must not give a year).
STAFF_ADJUST_MAX = dt.timedelta(days=60)
REASON_MAX = 500  # the customer reads it on the order page, the receipt and an email


class CreditRefused(Exception):
    """The adjustment cannot be made (the rental is not running, no reason, the end would be in the past).
    `field` names the input at fault ("reason", "minutes"; None: the order itself), for the form to show it."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def downtime_credited_seconds(order: Order) -> int:
    """Seconds of downtime already given back on this rental (what the cap is measured against)."""
    total = order.credits.filter(kind=CreditKind.DOWNTIME).aggregate(total=Sum("seconds"))["total"]
    return int(total or 0)


def downtime_covered_seconds(order: Order, node_id: int, start: dt.datetime, end: dt.datetime) -> int:
    """Seconds of [start, end) inside the windows of the downtime credits of the rental's other nodes (their
    union): a node's own episodes follow one another, they never overlap."""
    credits = order.credits.filter(kind=CreditKind.DOWNTIME).exclude(node_id=node_id)
    windows = sorted(
        (max(start, down_from), min(end, down_until))
        for down_from, down_until in credits.values_list("down_from", "down_until")
        if down_from is not None and down_until is not None and down_from < end and down_until > start
    )
    covered, reached = 0.0, start
    for begins, ends in windows:
        begins = max(begins, reached)
        if ends > begins:
            covered += (ends - begins).total_seconds()
            reached = ends
    return int(covered)


def rental_downtime_credit(
    *, order_id: int, node_id: int, down_from: dt.datetime, down_until: dt.datetime, actor: str = "system"
) -> RentalCredit | None:
    """Give back the downtime [down_from, down_until) of a node of an active rental, within the cap. Idempotent
    per (order, node, down_from): the episode's existing credit is returned. None when the rental is not active
    (nothing to give back) or the window is empty. Downtime after the rental's planned end was not rental time:
    the window stops there."""
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=order_id)
        existing = order.credits.filter(kind=CreditKind.DOWNTIME, node_id=node_id, down_from=down_from).first()
        if existing is not None:
            return existing
        if order.status != OrderStatus.ACTIVE or order.ends_at is None:
            return None
        window_end = min(down_until, order.ends_at)
        asked = int((window_end - down_from).total_seconds())
        if asked <= 0:
            return None
        # A multi-lot rental's nodes down at the same time lose the rental those hours once (issue 39).
        covered = downtime_covered_seconds(order, node_id, down_from, window_end)
        room = max(0, settings.DOWNTIME_CREDIT_CAP_HOURS * 3600 - downtime_credited_seconds(order))
        seconds = min(asked - covered, room)
        capped = " (capped: the rental's downtime credit is used up)" if seconds < asked - covered else ""
        overlap = f", {_duration(covered)} of it given back already for another node" if covered else ""
        reason = f"downtime of {_duration(asked)} seen by the health probes{overlap}{capped}"
        return _credit_write(
            order=order,
            kind=CreditKind.DOWNTIME,
            seconds=seconds,
            asked=asked,
            reason=reason,
            actor=actor,
            node_id=node_id,
            down_from=down_from,
            down_until=down_until,
        )


def rental_time_adjust(*, order_id: int, seconds: int, reason: str, actor: str) -> RentalCredit:
    """Staff add (positive) or remove (negative) time on an active rental, with a reason. CreditRefused, in
    words, for no reason, no time, a rental that is not running, or an end that would be in the past."""
    reason = (reason or "").strip()
    if not reason:
        raise CreditRefused("give a reason: the customer and the other staff read it", field="reason")
    if len(reason) > REASON_MAX:
        raise CreditRefused(f"keep the reason under {REASON_MAX} characters", field="reason")
    if not seconds:
        raise CreditRefused("give a number of minutes other than 0", field="minutes")
    if abs(seconds) > STAFF_ADJUST_MAX.total_seconds():
        raise CreditRefused(f"at most {STAFF_ADJUST_MAX.days} days at once", field="minutes")
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=order_id)
        if order.status != OrderStatus.ACTIVE or order.ends_at is None:
            raise CreditRefused(f"order {order.reference} is {order.get_status_display()}: only a running rental moves")
        if order.ends_at + dt.timedelta(seconds=seconds) <= timezone.now():
            raise CreditRefused("that would end the rental in the past: remove less time", field="minutes")
        credit = _credit_write(
            order=order, kind=CreditKind.STAFF, seconds=seconds, asked=seconds, reason=reason, actor=actor
        )
        # The customer is told in their language (downtime credits are told by the recovery's email).
        email_enqueue(order_id=order.pk, name="time_adjusted", params={"credit_id": credit.pk})
        return credit


def _credit_write(
    *, order: Order, kind: str, seconds: int, asked: int, reason: str, actor: str, **fields: object
) -> RentalCredit:
    now = timezone.now()
    before = order.ends_at
    assert before is not None  # both callers checked that the rental runs, under the row lock
    after = before + dt.timedelta(seconds=seconds)
    credit = RentalCredit.objects.create(
        order=order,
        kind=kind,
        seconds=seconds,
        asked_seconds=asked,
        reason=reason,
        actor=actor,
        created_at=now,
        ends_at_before=before,
        ends_at_after=after,
        **fields,
    )
    if seconds:
        order.ends_at = after
        order.save(update_fields=["ends_at", "updated_at"])
        rental_end_moved.send(sender=RentalCredit, order=order, ends_at=after, credit=credit)
    else:  # a credit past the cap moves nothing, but the customer's page lists it: its version moves
        order.save(update_fields=["updated_at"])
    order_note(
        order=order,
        actor=actor,
        reason=f"end {'+' if seconds >= 0 else '-'}{_duration(abs(seconds))}: {reason}",
        now=now,
    )
    return credit


def _duration(seconds: int) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min"

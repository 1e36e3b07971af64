"""What the customer reads of the time given back on a rental (order page, receipt, API, emails), in their
language: each credit as a line (when, how long, why, which kind) and the downtime total against the cap.
The stored `reason` of a downtime credit is the staff's English note; the customer reads it rebuilt here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from orders.models import CreditKind, Order, RentalCredit
from orders.outbox import email_context


@dataclass(frozen=True)
class CreditLine:
    created_at: dt.datetime
    kind: str  # CreditKind: "downtime" or "staff"
    kind_label: str  # "Downtime given back" / "Adjusted by staff"
    seconds: int  # added to the end; negative: removed
    duration: str  # "+2 h 05 min", "−30 min"
    reason: str  # in the customer's language for downtime; the staff's own words for an adjustment
    ends_at_after: dt.datetime | None


def duration_words(seconds: int) -> str:
    """2 h 05 min, 45 min (no sign)."""
    hours, rest = divmod(abs(int(seconds)), 3600)
    if hours:
        return _("%(hours)d h %(minutes)02d min") % {"hours": hours, "minutes": rest // 60}
    return _("%(minutes)d min") % {"minutes": rest // 60}


def signed_duration(seconds: int) -> str:
    return ("+" if seconds >= 0 else "−") + duration_words(seconds)


def credit_reason(credit: RentalCredit) -> str:
    if credit.kind != CreditKind.DOWNTIME:
        return credit.reason
    text = _("The node was unreachable or failing its health checks for %(duration)s.") % {
        "duration": duration_words(credit.asked_seconds)
    }
    if credit.seconds < credit.asked_seconds:
        text += " " + _("Capped: the rental's downtime credit of %(cap)s hours is used up.") % {
            "cap": settings.DOWNTIME_CREDIT_CAP_HOURS
        }
    return text


def credit_lines(order: Order) -> list[CreditLine]:
    """The order's credits, oldest first, as the customer reads them."""
    return [
        CreditLine(
            created_at=credit.created_at,
            kind=credit.kind,
            kind_label=_("Downtime given back") if credit.kind == CreditKind.DOWNTIME else _("Adjusted by staff"),
            seconds=credit.seconds,
            duration=signed_duration(credit.seconds),
            reason=credit_reason(credit),
            ends_at_after=credit.ends_at_after,
        )
        for credit in order.credits.order_by("created_at", "pk")
    ]


def credit_summary(order: Order) -> dict[str, Any]:
    """Everything a page shows of the credits: the lines, the downtime given back in total, and the cap."""
    lines = credit_lines(order)
    downtime = sum(line.seconds for line in lines if line.kind == CreditKind.DOWNTIME)
    return {
        "lines": lines,
        "downtime_seconds": downtime,
        "downtime_total": duration_words(downtime),
        "cap_hours": settings.DOWNTIME_CREDIT_CAP_HOURS,
    }


def credits_api(order: Order) -> list[dict[str, Any]]:
    """The order JSON API's `credits`: machine values (the reason in the order's language for downtime)."""
    return [
        {
            "kind": line.kind,
            "seconds": line.seconds,
            "reason": line.reason,
            "created_at": line.created_at,
            "ends_at_after": line.ends_at_after,
        }
        for line in credit_lines(order)
    ]


@email_context("time_adjusted")
def time_adjusted_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    credit = RentalCredit.objects.get(pk=params["credit_id"], order=order)
    return {"credit": credit, "duration": duration_words(credit.seconds), "added": credit.seconds > 0}

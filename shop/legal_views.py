"""The terms of rental and the privacy notice: what is sold, the rental clock, refunds, personal data.

The figures come from the catalog and the settings the code runs with, so the pages cannot promise another
lot, duration, payment window or refund threshold than the shop applies.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from shop.catalog import catalog_current


def _figures() -> dict[str, object]:
    return {
        "catalog": catalog_current(),
        "payment_window_minutes": settings.PAYMENT_WINDOW_MINUTES,
        "payment_watch_days": settings.PAYMENT_WATCH_DAYS,
        "refund_min_usd": settings.REFUND_MIN_USD,
        "downtime_credit_cap_hours": settings.DOWNTIME_CREDIT_CAP_HOURS,
        "unpaid_order_keep_days": settings.UNPAID_ORDER_KEEP_DAYS,
        "money_evidence_keep_days": settings.MONEY_EVIDENCE_KEEP_DAYS,
        "money_evidence_keep_years": round(settings.MONEY_EVIDENCE_KEEP_DAYS / 365.25),
    }


def terms(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/terms.html", _figures())


def privacy(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/privacy.html", _figures())

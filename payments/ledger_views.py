"""The ledger as an admin page (`/admin/ledger/`): the CSV's rows with filters, and their totals per asset and
kind, for treasurers and reviewers. Amounts in units with their symbol; the CSV keeps base units too."""

from __future__ import annotations

import datetime as dt

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from payments.ledger import KINDS, amount_shown, ledger_rows, ledger_totals
from payments.models import Network

PER_PAGE = 200


def _day(raw: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(raw[:20]) if raw else None
    except ValueError:
        return None


def ledger_page(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm("payments.view_ledger"):
        raise PermissionDenied
    start, end = _day(request.GET.get("from", "")), _day(request.GET.get("to", ""))
    kind, network = request.GET.get("kind", ""), request.GET.get("network", "")
    kind = kind if kind in KINDS else ""
    query = request.GET.copy()
    query.pop("page", None)  # the filters alone: for the CSV link and each page's link
    rows = ledger_rows(start=start, end=end, kind=kind, network=network)
    page = Paginator(rows, PER_PAGE).get_page(request.GET.get("page"))
    for row in page.object_list:
        row["amount_shown"] = amount_shown(row)
    context = {
        **admin.site.each_context(request),
        "title": "Ledger",
        "rows": page.object_list,
        # Per asset and kind, over every row the filters keep (not only this page's).
        "totals": ledger_totals(rows),
        "page": page,
        "kinds": KINDS,
        "networks": Network.objects.order_by("position").values_list("slug", flat=True),
        "chosen": {"from": start, "to": end, "kind": kind, "network": network},
        "csv_query": query.urlencode(),
    }
    return TemplateResponse(request, "admin/ledger.html", context)

"""The ledger as an admin page (`/admin/ledger/`): the CSV's rows with filters, for treasurers and reviewers."""

from __future__ import annotations

import datetime as dt

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from payments.ledger import COLUMNS, ledger_rows
from payments.models import Network

KINDS = ("credit", "gas", "refund", "sweep", "unexpected_outflow")


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
    rows = [
        row
        for row in ledger_rows(start=start, end=end)
        if (not kind or row["kind"] == kind) and (not network or row["network"] == network)
    ]
    context = {
        **admin.site.each_context(request),
        "title": "Ledger",
        "columns": COLUMNS,
        "rows": rows,
        "kinds": KINDS,
        "networks": Network.objects.order_by("position").values_list("slug", flat=True),
        "chosen": {"from": start, "to": end, "kind": kind, "network": network},
        "csv_query": request.GET.urlencode(),
    }
    return TemplateResponse(request, "admin/ledger.html", context)

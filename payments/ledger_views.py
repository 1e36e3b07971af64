"""The ledger as an admin page (`/admin/ledger/`): the CSV's rows with filters, for treasurers and reviewers."""

from __future__ import annotations

import datetime as dt

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from payments.ledger import COLUMNS, KINDS, ledger_rows
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
    page = Paginator(ledger_rows(start=start, end=end, kind=kind, network=network), PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        **admin.site.each_context(request),
        "title": "Ledger",
        "columns": COLUMNS,
        "rows": page.object_list,
        "page": page,
        "kinds": KINDS,
        "networks": Network.objects.order_by("position").values_list("slug", flat=True),
        "chosen": {"from": start, "to": end, "kind": kind, "network": network},
        "csv_query": query.urlencode(),
    }
    return TemplateResponse(request, "admin/ledger.html", context)

"""The ledger as an admin page (`/admin/ledger/`): the CSV's rows with filters, and their totals per asset and
kind, for treasurers and reviewers. Amounts in units with their symbol; the CSV keeps base units too."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import pgettext

from payments.ledger import KINDS, amount_shown, kind_label, ledger_movements, ledger_totals_in_database
from payments.models import Network

PER_PAGE = 200


def _day(raw: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(raw[:20]) if raw else None
    except ValueError:
        return None


class _Movements:
    """What the paginator pages: the count the totals gave, and a page read from the ordered movements (the rows
    up to the page's end, never the whole history sorted in memory)."""

    def __init__(self, filters: dict[str, Any], *, count: int) -> None:
        self.filters, self._count = filters, count

    def count(self) -> int:
        return self._count

    def __getitem__(self, window: slice) -> list[dict[str, Any]]:
        # Each kind read in chunks no larger than the page's end: page 1 reads at most 200 rows of each
        movements = ledger_movements(**self.filters, chunk=max(1, window.stop))
        try:
            return list(itertools.islice(movements, window.start, window.stop))
        finally:
            movements.close()  # its transaction ends here, not whenever the generator is collected


def ledger_page(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm("payments.view_ledger"):
        raise PermissionDenied
    start, end = _day(request.GET.get("from", "")), _day(request.GET.get("to", ""))
    kind, network = request.GET.get("kind", ""), request.GET.get("network", "")
    kind = kind if kind in KINDS else ""
    query = request.GET.copy()
    query.pop("page", None)  # the filters alone: for the CSV link and each page's link
    filters: dict[str, Any] = {"start": start, "end": end, "kind": kind, "network": network}
    # Per asset and kind, over every row the filters keep (not only this page's), summed by the database.
    totals = ledger_totals_in_database(**filters)
    rows = _Movements(filters, count=sum(total.count for total in totals if total.kind != "net"))
    page: Page[dict[str, Any]] = Paginator(rows, PER_PAGE).get_page(request.GET.get("page"))  # type: ignore[arg-type]
    for row in page.object_list:
        row["amount_shown"], row["kind_shown"] = amount_shown(row), kind_label(row["kind"])
    context = {
        **admin.site.each_context(request),
        "title": pgettext("staff", "Ledger"),
        "rows": page.object_list,
        "totals": totals,
        "page": page,
        "kinds": [(kind, kind_label(kind)) for kind in KINDS],
        "networks": Network.objects.order_by("position").values_list("slug", flat=True),
        "chosen": {"from": start, "to": end, "kind": kind, "network": network},
        "csv_query": query.urlencode(),
    }
    return TemplateResponse(request, "admin/ledger.html", context)

"""The books: one row per on-chain movement of the shop's money (credits in; refunds, sweeps and unexpected
outflows out), oldest first, for treasurers and reviewers (`GET /api/v1/treasury/ledger.csv`, `/admin/ledger/`)."""

from __future__ import annotations

import csv
import datetime as dt
import heapq
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Count, Min, QuerySet, Sum
from django.utils.translation import pgettext, pgettext_lazy

from core.amounts import units_text
from payments.fields import format_units
from payments.models import Asset, Credit, CreditKind, Refund, RefundStatus, Sweep, UnexpectedOutflow

COLUMNS = [
    "time",
    "kind",
    "order",
    "network",
    "asset",
    "contract",
    "amount",
    "amount_base_units",
    "usd_value_at_quote",
    "tx_hash",
    "block",
    "from_address",  # who sent it: the customer's (or the gas account's) address for money in, the deposit
    "to_address",  # address for money out; where it went: the deposit address, or the refund's, sweep's address
]


# Each kind's rows are read as plain values, not model instances: the whole-history CSV reads one row per
# movement, and building a credit with its payment, order, network and asset cost more than the rest of the line.
_PAYMENT = ("payment__order__reference", "payment__address")
_OUTFLOW = ("created_at", "chain_id", "token_contract", "amount_base_units", "tx_hash", "block_number",
            "to_address", "network__slug", *_PAYMENT)  # fmt: skip
_CREDIT = ("block_timestamp", "kind", "chain_id", "token_contract", "amount_base_units", "tx_hash", "block_number",
           "sender", "network__slug", "asset__symbol", "asset__decimals", "payment__chain_id", "payment__contract",
           "payment__usd_rate", *_PAYMENT)  # fmt: skip
COLUMNS_READ = {
    "credit": _CREDIT,
    "gas": _CREDIT,
    "refund": (
        "sent_at",
        "network__slug",
        "symbol",
        "decimals",
        "token_contract",
        "amount_base_units",
        "tx_hash",
        "block_number",
        "to_address",
        *_PAYMENT,
    ),  # fmt: skip
    "sweep": _OUTFLOW,
    "unexpected_outflow": _OUTFLOW,
}


def _credit_row(credit: dict[str, Any]) -> dict[str, Any]:
    decimals = credit["asset__decimals"]
    contract = credit["token_contract"]
    own = (
        credit["chain_id"] == credit["payment__chain_id"]
        and contract.lower() == (credit["payment__contract"] or "").lower()
    )
    whole = Decimal(format_units(int(credit["amount_base_units"]), decimals)) if decimals is not None else None
    return {
        "time": credit["block_timestamp"],
        "kind": "gas" if credit["kind"] == CreditKind.GAS else "credit",
        "order": credit["payment__order__reference"],
        "network": credit["network__slug"],
        "asset": credit["asset__symbol"] or "",
        "contract": contract,
        "amount": whole if whole is not None else "",
        "amount_base_units": int(credit["amount_base_units"]),
        "usd_value_at_quote": (
            (whole * credit["payment__usd_rate"]).quantize(Decimal("0.01")) if own and whole is not None else ""
        ),
        "tx_hash": credit["tx_hash"],
        "block": credit["block_number"],
        "from_address": credit["sender"],
        "to_address": credit["payment__address"],
        "decimals": decimals,  # not a column: for the page's amounts and totals
    }


def _refund_row(refund: dict[str, Any]) -> dict[str, Any]:
    decimals = refund["decimals"]
    return {
        "time": refund["sent_at"],  # when the scan first saw the signer's transfer
        "kind": "refund",
        "order": refund["payment__order__reference"],
        "network": refund["network__slug"],
        "asset": refund["symbol"],
        "contract": refund["token_contract"],
        "amount": format_units(int(refund["amount_base_units"]), decimals) if decimals is not None else "",
        "amount_base_units": -int(refund["amount_base_units"]),
        "usd_value_at_quote": "",
        "tx_hash": refund["tx_hash"],
        "block": refund["block_number"] or "",
        "from_address": refund["payment__address"],  # the signer pays a refund from the deposit address
        "to_address": refund["to_address"],
        "decimals": decimals,
    }


def _outflow_row(row: dict[str, Any], kind: str, assets: dict[tuple[int, str], Asset]) -> dict[str, Any]:
    asset = assets.get((row["chain_id"], row["token_contract"].lower()))
    return {
        "time": row["created_at"],
        "kind": kind,
        "order": row["payment__order__reference"],
        "network": row["network__slug"],
        "asset": asset.symbol if asset else "",
        "contract": row["token_contract"],
        "amount": format_units(int(row["amount_base_units"]), asset.decimals) if asset else "",
        "amount_base_units": -int(row["amount_base_units"]),
        "usd_value_at_quote": "",
        "tx_hash": row["tx_hash"],
        "block": row["block_number"],
        "from_address": row["payment__address"],
        "to_address": row["to_address"],
        "decimals": asset.decimals if asset else None,
    }


KINDS = ("credit", "gas", "refund", "sweep", "unexpected_outflow")
# Each kind as the ledger page names it, in the reader's language (the CSV and the filter keep the kind itself).
KIND_LABELS = {
    "credit": pgettext_lazy("staff", "credit"),
    "gas": pgettext_lazy("staff", "gas top-up"),
    "refund": pgettext_lazy("staff", "refund"),
    "sweep": pgettext_lazy("staff", "sweep"),
    "unexpected_outflow": pgettext_lazy("staff", "unexpected outflow"),
    "net": pgettext_lazy("staff", "net"),
}


def kind_label(kind: str) -> str:
    return str(KIND_LABELS.get(kind, kind))


def _assets_by_contract() -> dict[tuple[int, str], Asset]:
    """The assets the shop sells by (chain, contract): what names a sweep's or an outflow's token."""
    return {(a.network.chain_id, (a.contract or "").lower()): a for a in Asset.objects.select_related("network")}


CHUNK = 2_000  # rows read from the database at a time, per kind
LEDGER_DEFAULT_DAYS = 31  # the CSV without a range: the last month, not every movement ever


def _bounds(start: dt.date | None, end: dt.date | None) -> dict[str, Any]:
    """[start, end] as whole UTC days, for a `time` column: `__gte`/`__lt` lookups for the database."""
    bounds = {}
    if start is not None:
        bounds["gte"] = dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC)
    if end is not None:
        bounds["lt"] = dt.datetime.combine(end + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    return bounds


def _in(field: str, bounds: dict[str, Any]) -> dict[str, Any]:
    return {f"{field}__{lookup}": moment for lookup, moment in bounds.items()}


def _streams(
    start: dt.date | None, end: dt.date | None, kind: str, network: str
) -> list[tuple[str, QuerySet[Any], str]]:
    """(kind, its rows within the filters, the name of their time) for each kind asked: one query each."""
    bounds = _bounds(start, end)
    where = {"network__slug": network} if network else {}
    credits = Credit.objects.on_chain().filter(**where, **_in("block_timestamp", bounds))
    sent = (RefundStatus.SENT, RefundStatus.CONFIRMED)
    refunds = Refund.objects.filter(status__in=sent, **where, **_in("sent_at", bounds))
    streams = [
        ("credit", credits.exclude(kind=CreditKind.GAS), "block_timestamp"),
        ("gas", credits.filter(kind=CreditKind.GAS), "block_timestamp"),
        ("refund", refunds, "sent_at"),
        ("sweep", Sweep.objects.filter(removed_at__isnull=True, **where, **_in("created_at", bounds)), "created_at"),
        ("unexpected_outflow", UnexpectedOutflow.objects.filter(**where, **_in("created_at", bounds)), "created_at"),
    ]
    return [stream for stream in streams if not kind or stream[0] == kind]


def _row_maker(kind: str, assets: dict[tuple[int, str], Asset]) -> Callable[[Any], dict[str, Any]]:
    if kind in ("credit", "gas"):
        return _credit_row
    if kind == "refund":
        return _refund_row
    return lambda row: _outflow_row(row, kind, assets)


def ledger_movements(
    *,
    start: dt.date | None = None,
    end: dt.date | None = None,
    kind: str = "",
    network: str = "",
    chunk: int = CHUNK,
) -> Generator[dict[str, Any], None, None]:
    """Movements whose time falls within [start, end] (whole UTC days), of one kind and network when asked,
    oldest first. Each kind is one query in the database's order, read `chunk` rows at a time and merged here: a
    page or a CSV line costs the rows read up to it, never the whole history loaded and sorted at once (issue 30).
    """
    assets = _assets_by_contract()
    # In a transaction: PostgreSQL computes a cursor opened outside one (WITH HOLD) in full before the first row
    # (568 ms for a page at 100,000 orders); inside one it yields rows as the merge asks for them. The cursors
    # are closed before the transaction ends, whether every row was read or the reader stopped early.
    with transaction.atomic():
        names: list[str] = []
        cursors: list[Any] = []  # Django's chunked-cursor generators
        for name, rows, time in _streams(start, end, kind, network):
            ordered = rows.order_by(time, "tx_hash", "pk").values(*COLUMNS_READ[name])
            names.append(name)
            cursors.append(ordered.iterator(chunk_size=chunk))
        streams = [map(_row_maker(name, assets), cursor) for name, cursor in zip(names, cursors, strict=True)]
        try:
            yield from heapq.merge(*streams, key=lambda row: (row["time"], row["kind"], row["tx_hash"]))
        finally:
            for cursor in cursors:
                cursor.close()


def ledger_csv_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The CSV, a line at a time (streamed to the client as it is read from the database)."""
    line = _Line()
    writer = csv.DictWriter(line, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    yield line.take()
    for row in rows:
        writer.writerow({key: _cell(row[key]) for key in COLUMNS})
        yield line.take()


class _Line:
    """A file for csv.writer that hands back what was written since the last take()."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def take(self) -> str:
        text, self.text = self.text, ""
        return text


@dataclass(frozen=True)
class Total:
    """The movements of one kind in one asset among the rows: how many, and their sum (out is negative)."""

    network: str
    asset: str  # the symbol, or the token's contract for a token the shop does not sell
    kind: str  # one of KINDS, or "net" (every kind of the asset together)
    count: int
    base_units: int
    decimals: int | None

    @property
    def amount(self) -> str:
        if self.decimals is None:
            return pgettext("staff", "%(base_units)s base units") % {"base_units": self.base_units}
        return units_text(self.base_units, self.decimals, self.asset)

    @property
    def kind_label(self) -> str:
        return kind_label(self.kind)


def _totals(parts: Iterable[tuple[dict[str, Any], int, int]]) -> list[Total]:
    """Per asset (network and token) and kind, the count and sum of the parts (a row's fields, its count, its
    base units), then the asset's net; assets in the order they first appear, kinds in the order of KINDS.
    Never one sum across assets."""
    sums: dict[tuple[str, str, str], dict[str, list[int]]] = {}
    decimals: dict[tuple[str, str, str], int | None] = {}
    for row, count, base_units in parts:
        key = (row["network"], row["asset"] or row["contract"], row["contract"].lower())
        decimals.setdefault(key, row["decimals"])
        count_and_sum = sums.setdefault(key, {}).setdefault(row["kind"], [0, 0])
        count_and_sum[0] += count
        count_and_sum[1] += base_units
    totals = []
    for key, kinds in sums.items():
        network, asset, _contract = key
        for kind in KINDS:
            if kind in kinds:
                count, base_units = kinds[kind]
                totals.append(Total(network, asset, kind, count, base_units, decimals[key]))
        if len(kinds) > 1:
            net = sum(base_units for _count, base_units in kinds.values())
            count = sum(count for count, _base_units in kinds.values())
            totals.append(Total(network, asset, "net", count, net, decimals[key]))
    return totals


def ledger_totals_in_database(
    *, start: dt.date | None = None, end: dt.date | None = None, kind: str = "", network: str = ""
) -> list[Total]:
    """The totals of ledger_movements of the same filters, summed by the database (one grouped query per kind):
    the totals of 100,000 orders' movements without reading them."""
    assets = _assets_by_contract()
    groups = []
    for name, rows, time in _streams(start, end, kind, network):
        sign = 1 if name in ("credit", "gas") else -1
        fields = ["network__slug", "chain_id", "token_contract"]
        fields += ["asset__symbol", "asset__decimals"] if name in ("credit", "gas") else []
        fields += ["symbol", "decimals"] if name == "refund" else []
        summed = rows.order_by().values(*fields).annotate(count=Count("pk"), base=Sum("amount_base_units"),
                                                          first=Min(time))  # fmt: skip
        for group in summed:
            contract = group["token_contract"] or ""
            if name in ("credit", "gas"):
                symbol, decimals = group["asset__symbol"], group["asset__decimals"]
            elif name == "refund":
                symbol, decimals = group["symbol"], group["decimals"]
            else:
                asset = assets.get((group["chain_id"], contract.lower()))
                symbol, decimals = (asset.symbol, asset.decimals) if asset else ("", None)
            row = {"network": group["network__slug"], "asset": symbol or "", "contract": contract, "kind": name,
                   "decimals": decimals, "time": group["first"]}  # fmt: skip
            groups.append((row, group["count"], sign * int(group["base"])))
    groups.sort(key=lambda item: (item[0]["time"], KINDS.index(item[0]["kind"])))
    return _totals((row, count, base) for row, count, base in groups)


def amount_shown(row: dict[str, Any]) -> str:
    """A row's amount on the page: signed (out is negative), in units with its symbol."""
    if row["decimals"] is None:
        words = pgettext("staff", "%(base_units)s base units of token %(contract)s")
        return words % {"base_units": row["amount_base_units"], "contract": row["contract"]}
    return units_text(int(row["amount_base_units"]), row["decimals"], row["asset"])


def _cell(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    text = str(value)
    # A spreadsheet runs a cell that starts with these as a formula: none of ours should, none may.
    return "'" + text if text[:1] in ("=", "+", "@") else text

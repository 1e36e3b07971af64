"""The books: one row per on-chain movement of the shop's money (credits in; refunds, sweeps and unexpected
outflows out), oldest first, for treasurers and reviewers (`GET /api/v1/treasury/ledger.csv`, `/admin/ledger/`)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce

from core.amounts import units_text
from payments.fields import format_units
from payments.models import Asset, Credit, CreditKind, Refund, RefundEvent, RefundStatus, Sweep, UnexpectedOutflow

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


def _credit_row(credit: Credit) -> dict[str, Any]:
    payment = credit.payment
    decimals = credit.asset.decimals if credit.asset else None
    own = credit.chain_id == payment.chain_id and credit.token_contract.lower() == (payment.contract or "").lower()
    whole = Decimal(format_units(int(credit.amount_base_units), decimals)) if decimals is not None else None
    return {
        "time": credit.block_timestamp,
        "kind": "gas" if credit.kind == CreditKind.GAS else "credit",
        "order": payment.order.reference,
        "network": credit.network.slug,
        "asset": credit.asset.symbol if credit.asset else "",
        "contract": credit.token_contract,
        "amount": whole if whole is not None else "",
        "amount_base_units": int(credit.amount_base_units),
        "usd_value_at_quote": (whole * payment.usd_rate).quantize(Decimal("0.01")) if own and whole is not None else "",
        "tx_hash": credit.tx_hash,
        "block": credit.block_number,
        "from_address": credit.sender,
        "to_address": payment.address,
        "decimals": decimals,  # not a column: for the page's amounts and totals
    }


def _refund_row(refund: Refund) -> dict[str, Any]:
    return {
        "time": refund.sent_at,  # when the signer's transfer was seen (annotated by ledger_rows)
        "kind": "refund",
        "order": refund.payment.order.reference,
        "network": refund.network.slug,
        "asset": refund.symbol,
        "contract": refund.token_contract,
        "amount": format_units(int(refund.amount_base_units), refund.decimals) if refund.decimals is not None else "",
        "amount_base_units": -int(refund.amount_base_units),
        "usd_value_at_quote": "",
        "tx_hash": refund.tx_hash,
        "block": refund.block_number or "",
        "from_address": refund.payment.address,  # the signer pays a refund from the deposit address
        "to_address": refund.to_address,
        "decimals": refund.decimals,
    }


def _outflow_row(row: Sweep | UnexpectedOutflow, kind: str, assets: dict[tuple[int, str], Asset]) -> dict[str, Any]:
    asset = assets.get((row.chain_id, row.token_contract.lower()))
    return {
        "time": row.created_at,
        "kind": kind,
        "order": row.payment.order.reference,
        "network": row.network.slug,
        "asset": asset.symbol if asset else "",
        "contract": row.token_contract,
        "amount": format_units(int(row.amount_base_units), asset.decimals) if asset else "",
        "amount_base_units": -int(row.amount_base_units),
        "usd_value_at_quote": "",
        "tx_hash": row.tx_hash,
        "block": row.block_number,
        "from_address": row.payment.address,
        "to_address": row.to_address,
        "decimals": asset.decimals if asset else None,
    }


KINDS = ("credit", "gas", "refund", "sweep", "unexpected_outflow")


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


def ledger_rows(
    *, start: dt.date | None = None, end: dt.date | None = None, kind: str = "", network: str = ""
) -> list[dict[str, Any]]:
    """Movements whose time falls within [start, end] (whole UTC days), of one kind and network when asked,
    oldest first. Every filter runs in the database: the books grow with every order, a page of them must not."""
    bounds = _bounds(start, end)
    where = {"network__slug": network} if network else {}
    wanted = set(KINDS) if not kind else {kind}
    rows = []
    if wanted & {"credit", "gas"}:
        credits = Credit.objects.on_chain().filter(**where, **_in("block_timestamp", bounds))
        if wanted.isdisjoint({"credit"}):
            credits = credits.filter(kind=CreditKind.GAS)
        elif wanted.isdisjoint({"gas"}):
            credits = credits.exclude(kind=CreditKind.GAS)
        rows += [_credit_row(c) for c in credits.select_related("payment__order", "network", "asset")]
    if "refund" in wanted:
        sent_at = RefundEvent.objects.filter(refund=OuterRef("pk"), to_status=RefundStatus.SENT).values("created_at")
        refunds = (
            Refund.objects.filter(status__in=(RefundStatus.SENT, RefundStatus.CONFIRMED), **where)
            .annotate(sent_at=Coalesce(Subquery(sent_at[:1]), "created_at"))
            .filter(**_in("sent_at", bounds))
            .select_related("payment__order", "network")
        )
        rows += [_refund_row(refund) for refund in refunds]
    assets = {(a.network.chain_id, (a.contract or "").lower()): a for a in Asset.objects.select_related("network")}
    outflows = {
        "sweep": Sweep.objects.filter(removed_at__isnull=True),
        "unexpected_outflow": UnexpectedOutflow.objects.all(),
    }
    for name, rows_of_kind in outflows.items():
        if name in wanted:
            chosen = rows_of_kind.filter(**where, **_in("created_at", bounds))
            rows += [_outflow_row(row, name, assets) for row in chosen.select_related("payment__order", "network")]
    return sorted(rows, key=lambda row: (row["time"], row["kind"], row["tx_hash"]))


def ledger_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _cell(row[key]) for key in COLUMNS})
    return out.getvalue()


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
            return f"{self.base_units} base units"
        return units_text(self.base_units, self.decimals, self.asset)


def ledger_totals(rows: list[dict[str, Any]]) -> list[Total]:
    """Per asset (network and token) and kind, the count and sum of the rows, then the asset's net; assets in
    the order they first appear, kinds in the order of KINDS. Never one sum across assets."""
    sums: dict[tuple[str, str, str], dict[str, list[int]]] = {}
    decimals: dict[tuple[str, str, str], int | None] = {}
    for row in rows:
        key = (row["network"], row["asset"] or row["contract"], row["contract"].lower())
        decimals.setdefault(key, row["decimals"])
        count_and_sum = sums.setdefault(key, {}).setdefault(row["kind"], [0, 0])
        count_and_sum[0] += 1
        count_and_sum[1] += int(row["amount_base_units"])
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


def amount_shown(row: dict[str, Any]) -> str:
    """A row's amount on the page: signed (out is negative), in units with its symbol."""
    if row["decimals"] is None:
        return f"{row['amount_base_units']} base units of token {row['contract']}"
    return units_text(int(row["amount_base_units"]), row["decimals"], row["asset"])


def _cell(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    text = str(value)
    # A spreadsheet runs a cell that starts with these as a formula: none of ours should, none may.
    return "'" + text if text[:1] in ("=", "+", "@") else text

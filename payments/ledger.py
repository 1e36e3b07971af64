"""The books: one row per on-chain movement of the shop's money (credits in; refunds, sweeps and unexpected
outflows out), oldest first, for treasurers and reviewers (`GET /api/v1/treasury/ledger.csv`, `/admin/ledger/`)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

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
]


def _credit_row(credit: Credit) -> dict:
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
    }


def _refund_row(refund: Refund) -> dict:
    sent = next((e.created_at for e in refund.events.all() if e.to_status == RefundStatus.SENT), refund.created_at)
    return {
        "time": sent,
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
    }


def _outflow_row(row: Sweep | UnexpectedOutflow, kind: str, assets: dict) -> dict:
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
    }


def ledger_rows(*, start: dt.date | None = None, end: dt.date | None = None) -> list[dict]:
    """Movements whose time falls within [start, end] (whole UTC days), oldest first."""
    credits = Credit.objects.on_chain().select_related("payment__order", "network", "asset")
    if start is not None:
        credits = credits.filter(block_timestamp__gte=dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC))
    if end is not None:
        credits = credits.filter(
            block_timestamp__lt=dt.datetime.combine(end + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
        )
    refunds = (
        Refund.objects.filter(status__in=(RefundStatus.SENT, RefundStatus.CONFIRMED))
        .select_related("payment__order", "network")
        .prefetch_related("events")
    )
    assets = {(a.network.chain_id, (a.contract or "").lower()): a for a in Asset.objects.select_related("network")}
    sweeps = Sweep.objects.filter(removed_at__isnull=True).select_related("payment__order", "network")
    outflows = UnexpectedOutflow.objects.select_related("payment__order", "network")
    rows = [_credit_row(credit) for credit in credits] + [_refund_row(refund) for refund in refunds]
    rows += [_outflow_row(sweep, "sweep", assets) for sweep in sweeps]
    rows += [_outflow_row(outflow, "unexpected_outflow", assets) for outflow in outflows]
    rows = [row for row in rows if _within(row["time"], start, end)]
    return sorted(rows, key=lambda row: (row["time"], row["kind"], row["tx_hash"]))


def _within(moment: dt.datetime, start: dt.date | None, end: dt.date | None) -> bool:
    day = moment.astimezone(dt.UTC).date()
    return (start is None or day >= start) and (end is None or day <= end)


def ledger_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _cell(value) for key, value in row.items()})
    return out.getvalue()


def _cell(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    text = str(value)
    # A spreadsheet runs a cell that starts with these as a formula: none of ours should, none may.
    return "'" + text if text[:1] in ("=", "+", "@") else text

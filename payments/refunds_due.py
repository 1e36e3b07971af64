"""What must be sent back, per asset it arrived in: amounts in different assets are never added together.

An asset is the pair (chain id, token contract) of a credit, the contract empty for the native coin: a
transfer of an 18-decimal token and one of a 6-decimal token stay two entries, each exact in its own units.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from payments.fields import format_units
from payments.models import Credit, CreditKind, PaymentRequest


def _entry(credit: Credit, base_units: int) -> dict[str, Any]:
    asset = credit.asset
    return {
        "network": credit.network.slug,
        "chain_id": credit.chain_id,
        "asset": asset.symbol if asset else None,
        "contract": credit.token_contract or None,
        "decimals": asset.decimals if asset else None,
        "base_units": str(base_units),
    }


def _by_asset(credits: Iterable[Credit]) -> list[dict[str, Any]]:
    entries: dict[tuple[int, str], dict[str, Any]] = {}
    for credit in credits:
        key = (credit.chain_id, credit.token_contract)
        if key in entries:
            entries[key]["base_units"] = str(int(entries[key]["base_units"]) + int(credit.amount_base_units))
        else:
            entries[key] = _entry(credit, int(credit.amount_base_units))
    return [entry for entry in entries.values() if int(entry["base_units"]) > 0]


FOREIGN = (CreditKind.WRONG_ASSET, CreditKind.WRONG_NETWORK)
ALL = "all"  # all the money on the order's address: a rejected payment, a refund of it all
UNNEEDED = "unneeded"  # the excess of its own asset over the quote, and every transfer that does not pay it
AFTER_SETTLEMENT = "after_settlement"  # what arrived once a reviewer accepted the rest
STRAY = "stray"  # final transfers of another asset or network: never the order's, whatever happens to it
FINAL = "final"  # every final transfer: late money for an order whose lots are gone, so none of it is the order's


def refunds_due_compute(*, payment: PaymentRequest, credits: list[Credit], scope: str) -> list[dict[str, Any]]:
    """What must go back, per asset, for one of the scopes above. Transfers that do not pay the order:
    another asset or network, late, or after the payment was settled."""
    # The shop's own gas top-ups are never due back to anyone.
    on_chain = [credit for credit in credits if credit.on_chain and credit.kind != CreditKind.GAS]
    if scope == ALL:
        return _by_asset(on_chain)
    if scope == AFTER_SETTLEMENT:
        return _by_asset(credit for credit in on_chain if credit.after_settlement)
    if scope == STRAY:
        return _by_asset(credit for credit in on_chain if credit.kind in FOREIGN and credit.final)
    if scope == FINAL:
        return _by_asset(credit for credit in on_chain if credit.final)
    paying = [credit for credit in on_chain if credit.counted and credit.kind == CreditKind.MATCH]
    others = [credit for credit in on_chain if credit not in paying]
    due = _by_asset(others)
    excess = sum(int(credit.amount_base_units) for credit in paying) - int(payment.amount_base_units)
    if excess > 0:
        key = next(entry for entry in _by_asset(paying))
        mine = next((e for e in due if (e["chain_id"], e["contract"]) == (key["chain_id"], key["contract"])), None)
        if mine is None:
            due.insert(0, {**key, "base_units": str(excess)})
        else:
            mine["base_units"] = str(int(mine["base_units"]) + excess)
    return due


def refunds_due_text(refunds_due: list[dict[str, Any]]) -> str:
    """'1.5 USDC on local, 0.001 ETH on local, 42 base units of token 0x… on base': for events and admin."""
    parts = []
    for entry in refunds_due:
        if entry["decimals"] is None:
            parts.append(f"{entry['base_units']} base units of token {entry['contract']} on {entry['network']}")
        else:
            amount = format_units(int(entry["base_units"]), entry["decimals"])
            parts.append(f"{amount} {entry['asset']} on {entry['network']}")
    return ", ".join(parts) or "nothing"

"""What must be sent back, per asset it arrived in: amounts in different assets are never added together.

An asset is the pair (chain id, token contract) of a credit, the contract empty for the native coin: a
transfer of an 18-decimal token and one of a 6-decimal token stay two entries, each exact in its own units.

Each entry is a `RefundDue`, its amount an integer in the asset's base units. It becomes JSON only at the edge:
`PaymentRequest.refunds_due` (a JSONField, read by the API, the order's page and the admin) stores
`RefundDue.to_json()`, the base units written as a string (JSON numbers lose digits past 2**53 in browsers);
`refunds_due_read` turns what is stored back into typed values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from payments.fields import format_units
from payments.models import Credit, CreditKind, PaymentRequest


class RefundDueJson(TypedDict):
    """One entry as `PaymentRequest.refunds_due` stores it and the API shows it."""

    network: str
    chain_id: int
    asset: str | None
    contract: str | None
    decimals: int | None
    base_units: str


@dataclass(frozen=True)
class RefundDue:
    """What is due back in one asset, exact in its base units."""

    network: str  # the network's slug
    chain_id: int
    asset: str | None  # the shop's symbol for it; None for a token the shop does not sell
    contract: str | None  # the token contract as the credit recorded it (lower case); None for the coin
    decimals: int | None  # None: a token the shop does not sell, whose decimals nobody recorded
    base_units: int

    @property
    def key(self) -> tuple[int, str]:
        """The asset: (chain id, token contract, '' for the coin), as credits and refunds name it."""
        return (self.chain_id, self.contract or "")

    def to_json(self) -> RefundDueJson:
        return {
            "network": self.network,
            "chain_id": self.chain_id,
            "asset": self.asset,
            "contract": self.contract,
            "decimals": self.decimals,
            "base_units": str(self.base_units),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RefundDue:
        decimals = raw["decimals"]
        return cls(
            network=str(raw["network"]),
            chain_id=int(raw["chain_id"]),
            asset=raw["asset"],
            contract=raw["contract"] or None,
            decimals=None if decimals is None else int(decimals),
            base_units=int(raw["base_units"]),
        )


def refunds_due_json(entries: Iterable[RefundDue]) -> list[RefundDueJson]:
    """What `PaymentRequest.refunds_due` stores."""
    return [entry.to_json() for entry in entries]


def refunds_due_read(stored: Iterable[Mapping[str, Any]]) -> list[RefundDue]:
    """`PaymentRequest.refunds_due` as typed values."""
    return [RefundDue.from_json(entry) for entry in stored]


def _entry(credit: Credit, base_units: int) -> RefundDue:
    asset = credit.asset
    return RefundDue(
        network=credit.network.slug,
        chain_id=credit.chain_id,
        asset=asset.symbol if asset else None,
        contract=credit.token_contract or None,
        decimals=asset.decimals if asset else None,
        base_units=base_units,
    )


def _by_asset(credits: Iterable[Credit]) -> list[RefundDue]:
    entries: dict[tuple[int, str], RefundDue] = {}
    for credit in credits:
        key = (credit.chain_id, credit.token_contract)
        if key in entries:
            entries[key] = dataclasses.replace(
                entries[key], base_units=entries[key].base_units + int(credit.amount_base_units)
            )
        else:
            entries[key] = _entry(credit, int(credit.amount_base_units))
    return [entry for entry in entries.values() if entry.base_units > 0]


FOREIGN = (CreditKind.WRONG_ASSET, CreditKind.WRONG_NETWORK)
ALL = "all"  # all the money on the order's address: a rejected payment, a refund of it all
UNNEEDED = "unneeded"  # the excess of its own asset over the quote, and every transfer that does not pay it
AFTER_SETTLEMENT = "after_settlement"  # what arrived once a reviewer accepted the rest
STRAY = "stray"  # final transfers of another asset or network: never the order's, whatever happens to it
FINAL = "final"  # every final transfer: late money for an order whose lots are gone, so none of it is the order's


def refunds_due_compute(*, payment: PaymentRequest, credits: list[Credit], scope: str) -> list[RefundDue]:
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
        own = next(entry for entry in _by_asset(paying))
        mine = next((index for index, entry in enumerate(due) if entry.key == own.key), None)
        if mine is None:
            due.insert(0, dataclasses.replace(own, base_units=excess))
        else:
            due[mine] = dataclasses.replace(due[mine], base_units=due[mine].base_units + excess)
    return due


def refunds_due_text(refunds_due: Iterable[RefundDue]) -> str:
    """'1.5 USDC on local, 0.001 ETH on local, 42 base units of token 0x… on base': for events and admin."""
    parts = []
    for entry in refunds_due:
        if entry.decimals is None:
            parts.append(f"{entry.base_units} base units of token {entry.contract} on {entry.network}")
        else:
            amount = format_units(entry.base_units, entry.decimals)
            parts.append(f"{amount} {entry.asset} on {entry.network}")
    return ", ".join(parts) or "nothing"

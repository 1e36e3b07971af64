"""The treasury plan's one format: the server writes it (`payments/treasury.py`, `GET /api/v1/treasury/plan/`) and
the signer reads it back, into the same typed values. No Django here: the signer runs on a machine without it.

`to_json` writes what the API answers, key for key and in the same order; `from_json` is the signer's reading of a
plan file, and checks everything it will act on (a plan comes from a server that may have been taken over): the
addresses, the derivation paths, the amounts as whole base units, the refund ids, the order references. The plan's
digest is taken over the JSON as it was read, never over what the signer made of it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from eth_utils import is_address, to_checksum_address

# An order reference as the shop writes them (B2-XXXX-XXXX): printed to the treasurer, so nothing that could forge
# a line of what they are shown (a newline, a terminal escape).
ORDER_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# The account that pays the gas of token transfers: the mnemonic's internal (change) chain, index 0, never a
# deposit; the server derives its address from the xpub, the signer from the mnemonic.
GAS_ACCOUNT_PATH = "m/44'/60'/0'/1/0"


class PlanError(ValueError):
    """The plan is not one the signer can carry out: a usage error, nothing is sent."""


class RefundJson(TypedDict):
    id: int
    to_address: str
    amount_base_units: int


class HeldBackJson(TypedDict):
    address: str
    order: str
    asset: str
    contract: str | None
    balance_base_units: int
    owed_base_units: int
    reason: str


class ItemJson(TypedDict):
    address: str
    order: str
    asset: str
    contract: str | None
    balance_base_units: int
    derivation_path: str
    refunds: list[RefundJson]
    sweep_base_units: int


class PlanJson(TypedDict):
    network: str
    chain_id: int
    treasury: str | None
    gas_account: str | None
    # What the server adds for the treasurer to read; the signer needs none of them (a plan without them is read).
    gas_account_path: NotRequired[str]
    gas_account_balance_wei: NotRequired[int]
    gas_price_wei: NotRequired[int]
    gas_estimate_wei: NotRequired[int]
    items: list[ItemJson]
    held_back: NotRequired[list[HeldBackJson]]


@dataclass(frozen=True, kw_only=True)
class PlanRefund:
    """An approved refund the signer pays from its item's address."""

    id: int  # the shop's refund id: the refund's name in the journal and the refund register
    to_address: str
    amount: int  # base units of the item's asset

    def to_json(self) -> RefundJson:
        return {"id": self.id, "to_address": self.to_address, "amount_base_units": self.amount}


@dataclass(frozen=True, kw_only=True)
class PlanItem:
    """One asset on one deposit address: its refunds first, then its sweep to the treasury."""

    address: str
    derivation_path: str
    asset: str  # the shop's symbol for it, for people; the signer shows what the token contract answers
    contract: str | None  # None: the chain's native coin
    balance: int  # base units on the address when the plan was made
    refunds: tuple[PlanRefund, ...]
    sweep: int  # base units to the treasury
    order: str = ""  # the order whose payment this address received: shown with each refund

    @property
    def is_native(self) -> bool:
        return self.contract is None

    def to_json(self) -> ItemJson:
        return {
            "address": self.address,
            "order": self.order,
            "asset": self.asset,
            "contract": self.contract,
            "balance_base_units": self.balance,
            "derivation_path": self.derivation_path,
            "refunds": [refund.to_json() for refund in self.refunds],
            "sweep_base_units": self.sweep,
        }


@dataclass(frozen=True, kw_only=True)
class HeldBack:
    """An address whose balance cannot cover its approved refunds: nothing is sent from it, a reviewer looks."""

    address: str
    order: str
    asset: str
    contract: str | None
    balance: int
    owed: int
    reason: str

    def to_json(self) -> HeldBackJson:
        return {
            "address": self.address,
            "order": self.order,
            "asset": self.asset,
            "contract": self.contract,
            "balance_base_units": self.balance,
            "owed_base_units": self.owed,
            "reason": self.reason,
        }


@dataclass(frozen=True, kw_only=True)
class Plan:
    network: str
    chain_id: int
    treasury: str | None  # None: the server knows no treasury for this network, so nothing is swept
    gas_account: str | None
    items: tuple[PlanItem, ...]
    # The server's figures for the treasurer (None in a plan written without them): not acted on by the signer.
    gas_account_path: str | None = None
    gas_account_balance_wei: int | None = None
    gas_price_wei: int | None = None
    gas_estimate_wei: int | None = None
    held_back: tuple[HeldBack, ...] | None = None
    # SHA-256 of the canonical JSON the plan was read from (from_json); empty for a plan made here.
    read_digest: str = field(default="", compare=False, repr=False)

    @property
    def digest(self) -> str:
        """Which plan a journal belongs to: the JSON read, or, for a plan made here, the JSON it writes."""
        return self.read_digest or plan_digest(self.to_json())

    def to_json(self) -> PlanJson:
        written: dict[str, object] = {
            "network": self.network,
            "chain_id": self.chain_id,
            "treasury": self.treasury,
            "gas_account": self.gas_account,
        }
        figures = {
            "gas_account_path": self.gas_account_path,
            "gas_account_balance_wei": self.gas_account_balance_wei,
            "gas_price_wei": self.gas_price_wei,
            "gas_estimate_wei": self.gas_estimate_wei,
        }
        written.update((name, value) for name, value in figures.items() if value is not None)
        written["items"] = [item.to_json() for item in self.items]
        if self.held_back is not None:
            written["held_back"] = [held.to_json() for held in self.held_back]
        return cast(PlanJson, written)  # the keys in the order the API has always written them

    @classmethod
    def from_json(cls, raw: object) -> Plan:
        """A plan as the signer reads it, checked whole: PlanError on anything it will not carry out."""
        if not isinstance(raw, dict):
            raise PlanError("the plan is not a JSON object")
        chain_id = raw.get("chain_id")
        if isinstance(chain_id, bool) or not isinstance(chain_id, int) or chain_id <= 0:
            raise PlanError(f"chain_id: {chain_id!r} is not a chain id")
        items = raw.get("items")
        if not isinstance(items, list):
            raise PlanError("items: not a list")
        parsed = tuple(_item(item, index) for index, item in enumerate(items))
        # One item per (address, asset): an address may hold a token and the coin, never the same asset twice.
        if len({(item.address, item.contract) for item in parsed}) != len(parsed):
            raise PlanError("two items share a deposit address and an asset")
        gas_account = raw.get("gas_account")
        treasury = raw.get("treasury")
        if treasury is None and any(item.sweep for item in parsed):
            raise PlanError("treasury: none given, yet the plan sweeps")
        return cls(
            network=str(raw.get("network") or ""),
            chain_id=chain_id,
            treasury=None if treasury is None else _address(treasury, "treasury"),
            gas_account=None if gas_account is None else _address(gas_account, "gas_account"),
            items=parsed,
            gas_account_path=_optional_path(raw.get("gas_account_path"), "gas_account_path"),
            gas_account_balance_wei=_optional_units(raw.get("gas_account_balance_wei"), "gas_account_balance_wei"),
            gas_price_wei=_optional_units(raw.get("gas_price_wei"), "gas_price_wei"),
            gas_estimate_wei=_optional_units(raw.get("gas_estimate_wei"), "gas_estimate_wei"),
            held_back=_held_back(raw.get("held_back")),
            read_digest=plan_digest(raw),
        )


def plan_digest(raw: object) -> str:
    """SHA-256 of a plan's canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _address(value: object, where: str) -> str:
    if not isinstance(value, str) or not is_address(value) or int(value, 16) == 0:
        raise PlanError(f"{where}: {value!r} is not an address")
    return str(to_checksum_address(value))


def _units(value: object, where: str) -> int:
    # bool is an int in Python: refuse it, and refuse strings and floats that would round.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlanError(f"{where}: {value!r} is not a whole number of base units")
    return value


def _optional_units(value: object, where: str) -> int | None:
    return None if value is None else _units(value, where)


def _optional_path(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("m/"):
        raise PlanError(f"{where}: {value!r} is not a derivation path")
    return value


def _order(value: object, where: str) -> str:
    if not (isinstance(value, str) and ORDER_REFERENCE.fullmatch(value)):
        raise PlanError(f"{where}: {value!r} is not an order reference (each refund is shown with its order)")
    return value


def _refund(raw: object, spot: str) -> PlanRefund:
    if not isinstance(raw, dict):
        raise PlanError(f"{spot} is not an object")
    refund_id = raw.get("id")
    if refund_id in (None, ""):
        raise PlanError(f"{spot}.id: missing (it names the refund in the journal)")
    if isinstance(refund_id, bool) or not isinstance(refund_id, int) or refund_id <= 0:
        raise PlanError(f"{spot}.id: {refund_id!r} is not a refund id")
    return PlanRefund(
        id=refund_id,
        to_address=_address(raw.get("to_address"), f"{spot}.to_address"),
        amount=_units(raw.get("amount_base_units"), f"{spot}.amount_base_units"),
    )


def _item(raw: object, index: int) -> PlanItem:
    where = f"items[{index}]"
    if not isinstance(raw, dict):
        raise PlanError(f"{where} is not an object")
    path = raw.get("derivation_path")
    if not isinstance(path, str) or not path.startswith("m/"):
        raise PlanError(f"{where}.derivation_path: {path!r} is not a derivation path")
    refunds = [_refund(refund, f"{where}.refunds[{number}]") for number, refund in enumerate(raw.get("refunds") or [])]
    if len({refund.id for refund in refunds}) != len(refunds):
        raise PlanError(f"{where}: two refunds share an id")
    order = raw.get("order") or ""
    if refunds or order:
        order = _order(order, f"{where}.order")
    contract = raw.get("contract")
    return PlanItem(
        address=_address(raw.get("address"), f"{where}.address"),
        derivation_path=path,
        asset=str(raw.get("asset") or ""),
        contract=None if contract is None else _address(contract, f"{where}.contract"),
        balance=_units(raw.get("balance_base_units"), f"{where}.balance_base_units"),
        refunds=tuple(refunds),
        sweep=_units(raw.get("sweep_base_units"), f"{where}.sweep_base_units"),
        order=order,
    )


def _held_back(raw: object) -> tuple[HeldBack, ...] | None:
    """The addresses the server held back: shown to nobody by the signer, yet read as strictly as the rest."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise PlanError("held_back: not a list")
    held = []
    for index, entry in enumerate(raw):
        where = f"held_back[{index}]"
        if not isinstance(entry, dict):
            raise PlanError(f"{where} is not an object")
        contract = entry.get("contract")
        reason = entry.get("reason")
        if not isinstance(reason, str):
            raise PlanError(f"{where}.reason: {reason!r} is not text")
        held.append(
            HeldBack(
                address=_address(entry.get("address"), f"{where}.address"),
                order=_order(entry.get("order"), f"{where}.order"),
                asset=str(entry.get("asset") or ""),
                contract=None if contract is None else _address(contract, f"{where}.contract"),
                balance=_units(entry.get("balance_base_units"), f"{where}.balance_base_units"),
                owed=_units(entry.get("owed_base_units"), f"{where}.owed_base_units"),
                reason=reason,
            )
        )
    return tuple(held)


def in_sending_order(items: tuple[PlanItem, ...]) -> list[PlanItem]:
    """The plan's order, except that an address's coin item goes before its token items: the coin is swept to 0
    first, then the token transfers get exactly their gas from the gas account (the other way round, their gas
    would come out of the coin the plan sweeps, and the coin item would no longer add up)."""
    first_seen: dict[str, int] = {}  # address -> index of its first item
    for index, item in enumerate(items):
        first_seen.setdefault(item.address, index)
    return sorted(items, key=lambda item: (first_seen[item.address], not item.is_native))


def load_plan(path: Path) -> Plan:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise PlanError(f"cannot read the plan {path}: {error}") from error
    return Plan.from_json(raw)

"""Reading a treasury plan (the server's `GET /api/v1/treasury/plan/`) into checked, typed values."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from eth_utils import is_address, to_checksum_address

# An order reference as the shop writes them (B2-XXXX-XXXX): printed to the treasurer, so nothing that could forge
# a line of what they are shown (a newline, a terminal escape).
ORDER_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class PlanError(ValueError):
    """The plan is not one the signer can carry out: a usage error, nothing is sent."""


@dataclass(frozen=True)
class Refund:
    id: str
    to_address: str
    amount: int


@dataclass(frozen=True)
class Item:
    address: str
    derivation_path: str
    asset: str
    contract: str | None  # None: the chain's native coin
    balance: int
    refunds: tuple[Refund, ...]
    sweep: int
    order: str = ""  # the order whose payment this address received: shown with each refund

    @property
    def is_native(self) -> bool:
        return self.contract is None


@dataclass(frozen=True)
class Plan:
    network: str
    chain_id: int
    treasury: str | None  # None: the server knows no treasury for this network, so nothing is swept
    items: tuple[Item, ...]
    gas_account: str | None
    digest: str  # SHA-256 of the plan's canonical JSON: which plan a journal belongs to


def _address(value: object, where: str) -> str:
    if not isinstance(value, str) or not is_address(value) or int(value, 16) == 0:
        raise PlanError(f"{where}: {value!r} is not an address")
    return to_checksum_address(value)


def _units(value: object, where: str) -> int:
    # bool is an int in Python: refuse it, and refuse strings and floats that would round.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlanError(f"{where}: {value!r} is not a whole number of base units")
    return value


def _item(raw: object, index: int) -> Item:
    where = f"items[{index}]"
    if not isinstance(raw, dict):
        raise PlanError(f"{where} is not an object")
    path = raw.get("derivation_path")
    if not isinstance(path, str) or not path.startswith("m/"):
        raise PlanError(f"{where}.derivation_path: {path!r} is not a derivation path")
    refunds = []
    for number, refund in enumerate(raw.get("refunds") or []):
        spot = f"{where}.refunds[{number}]"
        if not isinstance(refund, dict):
            raise PlanError(f"{spot} is not an object")
        if refund.get("id") in (None, ""):
            raise PlanError(f"{spot}.id: missing (it names the refund in the journal)")
        refunds.append(
            Refund(
                id=str(refund["id"]),
                to_address=_address(refund.get("to_address"), f"{spot}.to_address"),
                amount=_units(refund.get("amount_base_units"), f"{spot}.amount_base_units"),
            )
        )
    if len({refund.id for refund in refunds}) != len(refunds):
        raise PlanError(f"{where}: two refunds share an id")
    order = raw.get("order") or ""
    if (refunds or order) and not (isinstance(order, str) and ORDER_REFERENCE.fullmatch(order)):
        raise PlanError(f"{where}.order: {order!r} is not an order reference (each refund is shown with its order)")
    contract = raw.get("contract")
    return Item(
        address=_address(raw.get("address"), f"{where}.address"),
        derivation_path=path,
        asset=str(raw.get("asset") or ""),
        contract=None if contract is None else _address(contract, f"{where}.contract"),
        balance=_units(raw.get("balance_base_units"), f"{where}.balance_base_units"),
        refunds=tuple(refunds),
        sweep=_units(raw.get("sweep_base_units"), f"{where}.sweep_base_units"),
        order=order,
    )


def parse_plan(raw: object) -> Plan:
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
    return Plan(
        network=str(raw.get("network") or ""),
        chain_id=chain_id,
        treasury=None if treasury is None else _address(treasury, "treasury"),
        items=parsed,
        gas_account=None if gas_account is None else _address(gas_account, "gas_account"),
        digest=hashlib.sha256(json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()).hexdigest(),
    )


def in_sending_order(items: tuple[Item, ...]) -> list[Item]:
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
    return parse_plan(raw)

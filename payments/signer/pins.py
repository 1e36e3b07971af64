"""The treasurer's pins: what the signer takes from the treasurer (flags, or a config file on their machine) and
never from the plan, which a server taken over could rewrite: the treasury every sweep goes to, the gas account,
the chain, and the caps on what one run may refund. A plan that disagrees with a pin is refused whole."""

from __future__ import annotations

import argparse
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from payments.signer.files import read_guarded
from payments.signer.plan import Plan, PlanError
from payments.signer.plan import _address as address

CONFIG_KEYS = {
    "treasury",
    "gas_account",
    "chain_id",
    "max_refunds_usd",
    "max_refunds_native",
    "max_refunds_token",
}


@dataclass(frozen=True)
class Pins:
    treasury: str
    gas_account: str | None = None
    chain_id: int | None = None
    # Caps on one run's refunds, 0 = no refund of that kind: USD stablecoins together (1:1), the chain's coin (in
    # whole coins), and any other token by contract (in whole tokens); see refunds.py for how each is counted.
    max_refunds_usd: Decimal = Decimal(0)
    max_refunds_native: Decimal = Decimal(0)
    max_refunds_token: dict[str, Decimal] = field(default_factory=dict)


def amount(value: object, where: str) -> Decimal:
    """A cap: a non-negative decimal, from a flag's string or the config's string, integer or float."""
    try:
        number = Decimal(str(value)) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
    except InvalidOperation:
        number = None
    if number is None or not number.is_finite() or number < 0:
        raise PlanError(f"{where}: {value!r} is not an amount")
    return number


def token_caps(values: object, where: str) -> dict[str, Decimal]:
    """`CONTRACT=AMOUNT` flags, or the config's table of them."""
    if isinstance(values, list):
        pairs = []
        for value in values:
            contract, sign, cap = value.partition("=")
            if not sign:
                raise PlanError(f"{where}: {value!r} is not CONTRACT=AMOUNT")
            pairs.append((contract, cap))
    elif isinstance(values, dict):
        pairs = list(values.items())
    else:
        raise PlanError(f"{where}: not a table of contract = amount")
    return {address(contract, where): amount(cap, f"{where} {contract}") for contract, cap in pairs}


def read_config(path: Path) -> dict[str, Any]:
    """The TOML file's pins. Refused when it is a link, not a regular file, or writable by group or others: whoever
    can write it chooses where the sweeps go."""
    text = read_guarded(path, what="config file", forbidden=0o022, too_open="writable by group or others (mode {mode})")
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PlanError(f"cannot read the config file {path}: {error}") from error
    unknown = set(config) - CONFIG_KEYS
    if unknown:  # a misspelt cap would silently stay 0, a misspelt treasury unpinned
        raise PlanError(f"the config file {path}: unknown keys {', '.join(sorted(unknown))}")
    return config


def pins_from(args: argparse.Namespace) -> Pins:
    """The config file's pins (`--config`), each overridden by its flag; `treasury` is required."""
    config = read_config(args.config) if args.config is not None else {}

    def given(name: str) -> Any:
        flag = getattr(args, name)
        return flag if flag not in (None, []) else config.get(name)

    if given("treasury") is None:
        raise PlanError("--treasury: required (or `treasury` in the --config file): sweeps go there, not to the plan's")
    chain_id = given("chain_id")
    if chain_id is not None and (isinstance(chain_id, bool) or not isinstance(chain_id, int) or chain_id <= 0):
        raise PlanError(f"chain_id: {chain_id!r} is not a chain id")
    gas_account = given("gas_account")
    return Pins(
        treasury=address(given("treasury"), "treasury"),
        gas_account=None if gas_account is None else address(gas_account, "gas_account"),
        chain_id=chain_id,
        max_refunds_usd=amount(given("max_refunds_usd") or 0, "max_refunds_usd"),
        max_refunds_native=amount(given("max_refunds_native") or 0, "max_refunds_native"),
        max_refunds_token=token_caps(given("max_refunds_token") or {}, "max_refunds_token"),
    )


def check_plan(plan: Plan, pins: Pins, gas_account: str) -> None:
    """The plan against the pins, before any RPC: its treasury, its gas account (also the mnemonic's), its chain."""
    if plan.treasury is not None and plan.treasury != pins.treasury:
        raise PlanError(f"the plan's treasury {plan.treasury} is not the pinned {pins.treasury}")
    if pins.gas_account is not None and pins.gas_account != gas_account:
        raise PlanError(f"the mnemonic's gas account {gas_account} is not the pinned gas account {pins.gas_account}")
    if pins.chain_id is not None and plan.chain_id != pins.chain_id:
        raise PlanError(f"the plan is for chain {plan.chain_id}, the pinned chain is {pins.chain_id}")

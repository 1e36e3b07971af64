"""The mnemonic (read from a file only its owner may read) and the accounts derived from it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from payments.signer.plan import Plan, PlanError

# The account that pays the gas of token transfers: the mnemonic's internal (change) chain, never a deposit.
GAS_ACCOUNT_PATH = "m/44'/60'/0'/1/0"

Account.enable_unaudited_hdwallet_features()


def read_mnemonic(path: Path) -> str:
    """The file's words, refused when it is a link, not a regular file, or open to group or others."""
    try:
        info = os.lstat(path)
    except OSError as error:
        raise PlanError(f"cannot read the mnemonic file {path}: {error}") from error
    if not stat.S_ISREG(info.st_mode):
        raise PlanError(f"the mnemonic file {path} is not a regular file (a link or a device is refused)")
    if info.st_mode & 0o077:
        raise PlanError(
            f"the mnemonic file {path} is open to group or others (mode {info.st_mode & 0o777:o}): chmod 600"
        )
    # O_NOFOLLOW, then fstat: the file read is the one checked, even if the path changed in between.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode) or opened.st_mode & 0o077 or opened.st_ino != info.st_ino:
            raise PlanError(f"the mnemonic file {path} changed while it was read")
        words = " ".join(handle.read().split())
    if not words:
        raise PlanError(f"the mnemonic file {path} is empty")
    return words


def derive(mnemonic: str, path: str) -> LocalAccount:
    try:
        return Account.from_mnemonic(mnemonic, account_path=path)
    except (ValueError, TypeError) as error:
        raise PlanError(f"cannot derive {path} from the mnemonic: {error}") from error


def plan_accounts(plan: Plan, mnemonic: str) -> tuple[dict[str, LocalAccount], LocalAccount]:
    """Each item's account by address, and the gas account; refused unless every address derives at its path."""
    gas = derive(mnemonic, GAS_ACCOUNT_PATH)
    if plan.gas_account is not None and plan.gas_account != gas.address:
        raise PlanError(f"gas_account {plan.gas_account} is not the mnemonic's {GAS_ACCOUNT_PATH} ({gas.address})")
    accounts = {}
    for item in plan.items:
        account = derive(mnemonic, item.derivation_path)
        if account.address != item.address:
            raise PlanError(
                f"{item.address} does not derive from this mnemonic at {item.derivation_path} "
                f"(that path gives {account.address}): the plan is refused, nothing was sent"
            )
        if account.address == gas.address:
            raise PlanError(f"{item.address} is the gas account, not a deposit address")
        accounts[item.address] = account
    return accounts, gas

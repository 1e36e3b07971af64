"""The mnemonic (read from a file only its owner may read) and the accounts derived from it."""

from __future__ import annotations

from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from payments.signer.files import read_guarded
from payments.signer.plan import GAS_ACCOUNT_PATH, Plan, PlanError

Account.enable_unaudited_hdwallet_features()


def read_mnemonic(path: Path) -> str:
    """The file's words, refused when it is a link, not a regular file, or open to group or others."""
    text = read_guarded(
        path, what="mnemonic file", forbidden=0o077, too_open="open to group or others (mode {mode}): chmod 600"
    )
    words = " ".join(text.split())
    if not words:
        raise PlanError(f"the mnemonic file {path} is empty")
    return words


def derive(mnemonic: str, path: str) -> LocalAccount:
    try:
        account: LocalAccount = Account.from_mnemonic(mnemonic, account_path=path)
        return account
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

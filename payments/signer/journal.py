"""The journal: each transfer's signed bytes, written to disk before they are broadcast, so a rerun after a
crash or a dropped RPC sends the same transaction again (same nonce) rather than a second payment."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from payments.signer.plan import PlanError


class Journal:
    """{"plan": the plan's digest, "transfers": {name: {nonce, hash, raw, ...}}}, rewritten atomically and fsynced
    on every entry. A journal belongs to one plan: names repeat from plan to plan (an address swept again next
    month), so another plan's journal would make a new transfer look done."""

    def __init__(self, path: Path, plan_digest: str, *, lock: bool = True) -> None:
        self.path, self.plan_digest = path, plan_digest
        self.entries: dict[str, dict[str, Any]] = {}
        if lock:
            self._lock()
        if path.exists():
            try:
                stored = json.loads(path.read_text())
            except (OSError, ValueError) as error:
                raise PlanError(f"cannot read the journal {path}: {error}") from error
            if not isinstance(stored, dict) or stored.get("plan") != plan_digest:
                raise PlanError(
                    f"the journal {path} belongs to another plan: finish that plan with it, or move it away "
                    "(what it sent is on the chain; the balance check refuses to pay an item twice)"
                )
            self.entries = stored.get("transfers") or {}

    def _lock(self) -> None:
        """One signer per journal at a time: a second one, started while the first runs, would read the journal
        before the first wrote its transfers and sign them again at the next nonces. Held until the process ends."""
        self._lock_file = open(self.path.with_name(self.path.name + ".lock"), "a")  # noqa: SIM115 - held open
        try:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            raise PlanError(f"another signer is running with the journal {self.path}") from error

    def get(self, name: str) -> dict[str, Any] | None:
        return self.entries.get(name)

    def forget(self, name: str) -> None:
        """A transfer the node refused outright never entered any pool: a rerun may sign it anew."""
        self.entries.pop(name, None)
        self._write()

    def record(self, name: str, entry: dict[str, Any]) -> None:
        self.entries[name] = entry
        self._write()

    def _write(self) -> None:
        _write_json(self.path, {"plan": self.plan_digest, "transfers": self.entries})


class RefundRegister:
    """Every refund this mnemonic's signer has signed, on any plan: {"refunds": {"refund:<chain id>:<refund id>":
    {plan, nonce, hash, raw, gas, max_fee_per_gas, amount}}}, kept where the treasurer's runs all find it (not
    next to one plan, as the journal is). A refund the shop has not recorded yet (its scan has not seen the
    transfer) is in the next plan again: the signer then resumes the transaction it signed for it (its receipt,
    or the same bytes at the same nonce) and never signs a second one. Rewritten atomically and fsynced as the
    journal is; one signer at a time holds it (a lock beside it)."""

    def __init__(self, path: Path, *, lock: bool = True) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        if lock:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._lock_file = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 - held open
            try:
                fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as error:
                raise PlanError(f"another signer is running with the refund register {path}") from error
        if path.exists():
            try:
                stored = json.loads(path.read_text())
            except (OSError, ValueError) as error:
                raise PlanError(f"cannot read the refund register {path}: {error}") from error
            if not isinstance(stored, dict) or not isinstance(stored.get("refunds"), dict):
                raise PlanError(f"the refund register {path} is not one: move it away only if you know why")
            self.entries = stored["refunds"]

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def record(self, key: str, entry: dict[str, Any]) -> None:
        self.entries[key] = entry
        _write_json(self.path, {"refunds": self.entries})

    def forget(self, key: str) -> None:
        """Its transaction never entered any pool (the node refused it): the refund may be signed anew."""
        if self.entries.pop(key, None) is not None:
            _write_json(self.path, {"refunds": self.entries})


def refund_key(chain_id: int, refund_id: int) -> str:
    """What makes a refund unique for the signer, whatever plan names it: its chain and the shop's refund id."""
    return f"refund:{chain_id}:{refund_id}"


def default_register_path(gas_account: str) -> Path:
    """In the treasurer's state directory (XDG_STATE_HOME, else ~/.local/state), one file per mnemonic (named by
    its gas account): the same for every plan and every working directory."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "payments-signer" / f"refunds-{gas_account}.json"


def _write_json(path: Path, content: dict[str, Any]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(content, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def transfer_name(address: str, contract: str | None, what: str) -> str:
    """The fixed name of one transfer of a plan: `<deposit address>:<token contract or native>:` then
    `refund:<id>`, `sweep` or `gas:<n>` (one address may hold a token and the coin: two items)."""
    return f"{address}:{contract or 'native'}:{what}"

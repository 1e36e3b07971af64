"""The journal: each transfer's signed bytes, written to disk before they are broadcast, so a rerun after a
crash or a dropped RPC sends the same transaction again (same nonce) rather than a second payment."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from payments.signer.plan import PlanError


class Journal:
    """{"plan": the plan's digest, "transfers": {name: {nonce, hash, raw, ...}}}, rewritten atomically and fsynced
    on every entry. A journal belongs to one plan: names repeat from plan to plan (an address swept again next
    month), so another plan's journal would make a new transfer look done."""

    def __init__(self, path: Path, plan_digest: str, *, lock: bool = True) -> None:
        self.path, self.plan_digest = path, plan_digest
        self.entries: dict[str, dict] = {}
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

    def get(self, name: str) -> dict | None:
        return self.entries.get(name)

    def forget(self, name: str) -> None:
        """A transfer the node refused outright never entered any pool: a rerun may sign it anew."""
        self.entries.pop(name, None)
        self._write()

    def record(self, name: str, entry: dict) -> None:
        self.entries[name] = entry
        self._write()

    def _write(self) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"plan": self.plan_digest, "transfers": self.entries}, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


def transfer_name(address: str, contract: str | None, what: str) -> str:
    """The fixed name of one transfer of a plan: `<deposit address>:<token contract or native>:` then
    `refund:<id>`, `sweep` or `gas:<n>` (one address may hold a token and the coin: two items)."""
    return f"{address}:{contract or 'native'}:{what}"

"""The journal: each transfer's signed bytes, written to disk before they are broadcast, so a rerun after a
crash or a dropped RPC sends the same transaction again (same nonce) rather than a second payment."""

from __future__ import annotations

import json
import os
from pathlib import Path


class Journal:
    """A JSON object {transfer name: {nonce, hash, raw, ...}}, rewritten atomically and fsynced on every entry."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict] = json.loads(path.read_text()) if path.exists() else {}

    def get(self, name: str) -> dict | None:
        return self.entries.get(name)

    def record(self, name: str, entry: dict) -> None:
        self.entries[name] = entry
        temporary = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(self.entries, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


def transfer_name(item_address: str, what: str) -> str:
    """The fixed name of one transfer of a plan: `<deposit address>:refund:<id>`, `:sweep` or `:gas`."""
    return f"{item_address}:{what}"

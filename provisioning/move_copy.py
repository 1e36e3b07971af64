"""The tenant's files carried from the old node to the spare through this worker (the shop holds the operator key
for both; the nodes do not trust each other): the node tool move_files.py lists the account's files in its home
and the node's scratch folders with size and sha256 on the old node, then each file travels in chunks, read on the
old node and written on the spare, owned by the account there. Bounded by MOVE_COPY_MAX_GIB and
MOVE_COPY_MAX_MINUTES; resumable (a file the spare already holds with the same size and sha256 is skipped).

The report (NodeMove.copy_report) says what was copied and what was not, and why; the customer's email and the
manifest revision read it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from provisioning.access import _ensure_tool
from provisioning.drivers import driver_for
from provisioning.drivers.base import Driver, DriverError
from provisioning.models import AccessGrant, Node

TOOL = "provisioning/node_tools/move_files.py"
CHUNK_BYTES = 32 << 20
HOME = "home"
GIB = 1 << 30


@dataclass
class CopyReport:
    reachable: bool = True
    copied: list[dict[str, Any]] = field(default_factory=list)
    not_copied: list[dict[str, Any]] = field(default_factory=list)
    already_there: int = 0
    bytes_copied: int = 0
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "reachable": self.reachable,
            "copied": self.copied,
            "not_copied": self.not_copied,
            "already_there": self.already_there,
            "bytes_copied": self.bytes_copied,
            "error": self.error,
            "summary": self.summary(),
        }

    def summary(self) -> str:
        if not self.reachable:
            return f"The old node could not be reached: nothing was copied ({self.error})."[:500]
        text = f"{len(self.copied)} file(s) copied ({self.bytes_copied} bytes)"
        if self.not_copied:
            text += f", {len(self.not_copied)} not copied"
        return text + (f"; {self.error}" if self.error else "") + "."


def move_copy(*, old_grant: AccessGrant, new_node: Node) -> dict[str, Any]:
    """Copy the account's files from the old grant's node to `new_node`; the report as a dict."""
    report = CopyReport()
    old_node = old_grant.node
    try:
        old = driver_for(old_node, connect_timeout=settings.NODE_CONNECT_TIMEOUT_SECONDS).__enter__()
    except DriverError as exc:
        report.reachable, report.error = False, str(exc)[:300]
        return report.as_dict()
    try:
        with driver_for(new_node, connect_timeout=settings.NODE_CONNECT_TIMEOUT_SECONDS) as new:
            _copy_between(old, new, old_node=old_node, new_node=new_node, account=old_grant.account, report=report)
    finally:
        old.__exit__(None, None, None)
    return report.as_dict()


class _Tool:
    """move_files.py on one node, run as its root login with the node's Python."""

    def __init__(self, driver: Driver, node: Node, account: str) -> None:
        self.driver, self.node, self.account = driver, node, account
        if node.access_tool:
            raise CopyNotPossible(f"the operator login on {node.name} is not root: the copy needs root there")
        _ensure_tool(driver)

    def __call__(self, command: str, *args: str, timeout: float = 600) -> dict[str, Any]:
        argv = [self.node.python, f"{self.driver.workdir}/{TOOL}", command, "--account", self.account, *args]
        if self.node.accounts_root:
            argv += ["--users-prefix", self.node.accounts_root]
        result = self.driver.run(argv, timeout=timeout)
        if result.exit_code in (1, 2):  # refused, or its arguments refused: this file's problem, not the node's
            raise FileRefused(result.stderr.strip()[-300:])
        if result.exit_code != 0:
            raise DriverError(f"move_files {command} on {self.node.name} failed ({result.exit_code}): "
                              f"{result.stderr.strip()[-300:]}")
        return json.loads(result.stdout)


class FileRefused(Exception):
    """The node tool refused one file (a hostile name, a folder that is not the account's, a changed file)."""


class CopyNotPossible(Exception):
    """Nothing can be copied between these nodes (a login that is not root): the move goes on without the copy."""


class OldNodeLost(Exception):
    """The old node stopped answering during the copy: what is left is not copied, the move goes on."""


def _copy_between(old: Driver, new: Driver, *, old_node: Node, new_node: Node, account: str, report: CopyReport):
    roots = [HOME, *old_node.scratch_folders()]
    try:
        new_tool = _Tool(new, new_node, account)  # the spare's connection errors propagate: the job tries again
        old_tool = _Tool(old, old_node, account)
    except CopyNotPossible as exc:
        report.error = str(exc)
        return
    try:
        listed = old_tool("list", *[arg for root in roots for arg in ("--root", root)], timeout=3600)
    except (DriverError, FileRefused) as exc:
        report.error = f"the old node's files could not be listed: {exc}"[:500]
        return
    targets = {root: _target_root(root, new_node) for root in roots}
    new_roots = sorted({target for target in targets.values() if target})
    present = {
        (item["root"], item["path"]): (item["size"], item["sha256"])
        for item in new_tool("list", *[arg for root in new_roots for arg in ("--root", root)], timeout=3600)["files"]
    }
    for item in listed["skipped"]:
        report.not_copied.append({"where": item["root"], "path": item["path"], "why": item["why"]})
    budget = settings.MOVE_COPY_MAX_GIB * GIB
    deadline = time.monotonic() + settings.MOVE_COPY_MAX_MINUTES * 60
    lost = ""
    for item in listed["files"]:
        where, path, size = item["root"], item["path"], item["size"]
        target = targets[where]
        why = ""
        if lost:
            why = lost
        elif not target:
            why = f"{new_node.name} has no scratch folder to put it in"
        elif present.get((target, path)) == (size, item["sha256"]):
            report.already_there += 1
            report.copied.append({"where": where, "path": path, "size": size})
            continue
        elif report.bytes_copied + size > budget:
            why = f"over the copy's limit of {settings.MOVE_COPY_MAX_GIB} GiB (MOVE_COPY_MAX_GIB)"
        elif time.monotonic() > deadline:
            why = f"the copy's time limit of {settings.MOVE_COPY_MAX_MINUTES} minutes was reached"
        if why:
            report.not_copied.append({"where": where, "path": path, "why": why})
            continue
        try:
            _copy_file(old, new, old_tool, new_tool, item=item, target=target)
        except FileRefused as exc:
            report.not_copied.append({"where": where, "path": path, "why": str(exc)})
            continue
        except OldNodeLost as exc:
            lost = report.error = f"the old node stopped answering during the copy ({exc})"[:500]
            report.not_copied.append({"where": where, "path": path, "why": lost})
            continue
        report.copied.append({"where": where, "path": path, "size": size})
        report.bytes_copied += size


def _target_root(root: str, new_node: Node) -> str:
    """Where a root of the old node goes on the spare: the home to the home, a scratch folder to the same folder
    when the spare has it, else to the spare's first scratch folder ("" when it has none)."""
    if root == HOME:
        return HOME
    folders = new_node.scratch_folders()
    return root if root in folders else (folders[0] if folders else "")


def _copy_file(old: Driver, new: Driver, old_tool: _Tool, new_tool: _Tool, *, item: dict, target: str) -> None:
    """One file in chunks through this worker: read into the old node's workdir, carried, appended on the spare."""
    path, size = item["path"], item["size"]
    chunk_in, chunk_out = f"{old.workdir}/chunk", f"{new.workdir}/chunk"
    offset = 0
    while True:
        length = min(CHUNK_BYTES, size - offset)
        try:
            # `--path=P`: one word, so a name that starts with "-" is never read as an option (issue 39)
            old_tool("read", "--root", item["root"], f"--path={path}", "--offset", str(offset), "--length", str(length),
                     "--out", chunk_in)
            data = old.get_file(chunk_in)
        except DriverError as exc:
            raise OldNodeLost(str(exc)[:300]) from exc
        if len(data) != length:
            raise FileRefused(f"the file changed while it was copied ({offset + len(data)} of {size} bytes)")
        new.put_file(data, chunk_out, mode=0o600)
        last = offset + length >= size
        extra = ["--last", "--size", str(size), "--sha256", item["sha256"], "--mode", f"{item['mode']:o}"]
        new_tool("write", "--root", target, f"--path={path}", "--offset", str(offset), "--from", chunk_out,
                 *(extra if last else []))
        offset += length
        if last:
            return

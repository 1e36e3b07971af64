"""The tenant's files carried from the old node to the spare through this worker (the shop holds the operator key
for both; the nodes do not trust each other): the node tool move_files.py lists the account's files in its home
and the node's scratch folders with their size (no file is read to list it: a home of terabytes lists in the
time of its folders), then each file travels in chunks, read on the old node, hashed here as it passes and
written on the spare, owned by the account there, which checks the hash before the file takes its name. A file
that changes while it is copied (its size or modification time) is not copied. MOVE_COPY_MAX_GIB and
MOVE_COPY_MAX_MINUTES bound the listing as well as the copy. Resumable: a file the spare already holds with the
same size is hashed on both nodes, and skipped when the hashes agree.

The report (NodeMove.copy_report) says what was copied and what was not, and why; the customer's email and the
manifest revision read it."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from fleet.models import Node
from provisioning.access import _ensure_tool
from provisioning.drivers import driver_for
from provisioning.drivers.base import Driver, DriverError
from provisioning.models import AccessGrant

TOOL = "provisioning/node_tools/move_files.py"
CHUNK_BYTES = 32 << 20
HOME = "home"
GIB = 1 << 30
# What the node tool never copies by design (move_files.py's reasons): not the tenant's data, so leaving it out
# does not make the copy incomplete. Anything else not copied keeps the old node's files.
NEVER_COPIED = ("a symbolic link", "not a regular file", "not the account's file", "another filesystem mounted there")


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
            "complete": self.complete(),
        }

    def complete(self) -> bool:
        """Every file of the tenant's that could be copied was: the old node's copy may go."""
        left = [item for item in self.not_copied if not item["why"].startswith(NEVER_COPIED)]
        return self.reachable and not self.error and not left

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
            stderr = result.stderr.strip()[-300:]
            raise DriverError(f"move_files {command} on {self.node.name} failed ({result.exit_code}): {stderr}")
        answer = json.loads(result.stdout)
        if not isinstance(answer, dict):  # the node's answer is input, not trusted
            raise DriverError(f"move_files {command} on {self.node.name} answered no JSON object")
        return answer


class FileRefused(Exception):
    """The node tool refused one file (a hostile name, a folder that is not the account's, a changed file)."""


class CopyNotPossible(Exception):
    """Nothing can be copied between these nodes (a login that is not root): the move goes on without the copy."""


class OldNodeLost(Exception):
    """The old node stopped answering during the copy: what is left is not copied, the move goes on."""


def _copy_between(
    old: Driver, new: Driver, *, old_node: Node, new_node: Node, account: str, report: CopyReport
) -> None:
    roots = [HOME, *old_node.scratch_folders()]
    try:
        new_tool = _Tool(new, new_node, account)  # the spare's connection errors propagate: the job tries again
        old_tool = _Tool(old, old_node, account)
    except CopyNotPossible as exc:
        report.error = str(exc)
        return
    budget = settings.MOVE_COPY_MAX_GIB * GIB
    minutes = settings.MOVE_COPY_MAX_MINUTES
    deadline = time.monotonic() + minutes * 60
    over_limit = f"over the copy's limit of {settings.MOVE_COPY_MAX_GIB} GiB (MOVE_COPY_MAX_GIB)"
    try:
        listed = _list(old_tool, roots, max_bytes=budget, deadline=deadline)
    except (DriverError, FileRefused) as exc:
        report.error = f"the old node's files could not be listed: {exc}"[:500]
        return
    targets = {root: _target_root(root, new_node) for root in roots}
    new_roots = sorted({target for target in targets.values() if target})
    present = {
        (item["root"], item["path"]): item["size"]
        for item in _list(new_tool, new_roots, max_bytes=1 << 62, deadline=deadline)["files"]
    }
    for item in listed["skipped"]:
        report.not_copied.append({"where": item["root"], "path": item["path"], "why": item["why"]})
    for item in listed["over_budget"]:
        report.not_copied.append({"where": item["root"], "path": item["path"], "why": over_limit})
    if listed["stopped_at"]:
        where, _, path = listed["stopped_at"].partition(":")
        report.error = (
            f"the copy's time limit of {minutes} minutes (MOVE_COPY_MAX_MINUTES) was reached while listing: "
            "the files from this one on were not looked at"
        )
        report.not_copied.append({"where": where, "path": path, "why": report.error})
    lost = ""
    for item in listed["files"]:
        where, path, size = item["root"], item["path"], item["size"]
        target = targets[where]
        why = ""
        if lost:
            why = lost
        elif not target:
            why = f"{new_node.name} has no scratch folder to put it in"
        elif time.monotonic() > deadline:
            why = f"the copy's time limit of {minutes} minutes (MOVE_COPY_MAX_MINUTES) was reached"
            report.error = report.error or why
        elif present.get((target, path)) == size and _same_on_both(old_tool, new_tool, item=item, target=target):
            report.already_there += 1
            report.copied.append({"where": where, "path": path, "size": size})
            continue
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


def _list(tool: _Tool, roots: list[str], *, max_bytes: int, deadline: float) -> dict[str, Any]:
    """The tool's listing of these roots, within the bytes and the time left to the copy."""
    seconds = max(1.0, deadline - time.monotonic())
    args = [arg for root in roots for arg in ("--root", root)]
    return tool("list", *args, "--max-bytes", str(max_bytes), "--max-seconds", f"{seconds:.0f}", timeout=seconds + 120)


def _same_on_both(old_tool: _Tool, new_tool: _Tool, *, item: dict[str, Any], target: str) -> bool:
    """A file of the same size already on the spare (a resumed move): the same bytes on both nodes?"""
    try:
        theirs = old_tool("hash", "--root", item["root"], f"--path={item['path']}", timeout=3600)
        ours = new_tool("hash", "--root", target, f"--path={item['path']}", timeout=3600)
    except FileRefused:
        return False
    return theirs == ours


def _target_root(root: str, new_node: Node) -> str:
    """Where a root of the old node goes on the spare: the home to the home, a scratch folder to the same folder
    when the spare has it, else to the spare's first scratch folder ("" when it has none)."""
    if root == HOME:
        return HOME
    folders = new_node.scratch_folders()
    return root if root in folders else (folders[0] if folders else "")


def _copy_file(
    old: Driver, new: Driver, old_tool: _Tool, new_tool: _Tool, *, item: dict[str, Any], target: str
) -> None:
    """One file in chunks through this worker: read into the old node's workdir, carried, appended on the spare."""
    path, size = item["path"], item["size"]
    chunk_in, chunk_out = f"{old.workdir}/chunk", f"{new.workdir}/chunk"
    digest = hashlib.sha256()  # of the bytes as they pass: the spare checks its copy against it
    offset = 0
    while True:
        length = min(CHUNK_BYTES, size - offset)
        try:
            # `--path=P`: one word, so a name that starts with "-" is never read as an option (issue 39)
            read = old_tool(
                "read", "--root", item["root"], f"--path={path}", "--offset", str(offset), "--length", str(length),
                "--out", chunk_in,
            )  # fmt: skip
            data = old.get_file(chunk_in)
        except DriverError as exc:
            raise OldNodeLost(str(exc)[:300]) from exc
        if len(data) != length or (read["size"], read["mtime_ns"]) != (size, item["mtime_ns"]):
            raise FileRefused(f"the file changed while it was copied ({offset + len(data)} of {size} bytes read)")
        digest.update(data)
        new.put_file(data, chunk_out, mode=0o600)
        last = offset + length >= size
        extra = ["--last", "--size", str(size), "--sha256", digest.hexdigest(), "--mode", f"{item['mode']:o}"]
        new_tool(
            "write", "--root", target, f"--path={path}", "--offset", str(offset), "--from", chunk_out,
            *(extra if last else []),
        )  # fmt: skip
        offset += length
        if last:
            return

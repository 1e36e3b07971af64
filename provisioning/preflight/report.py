"""Check results, how per-rank results merge, the JSON report and the printed summary. Standard library only."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PASS = "pass"  # noqa: S105 - a check status, not a password
WARN = "warn"  # recorded and shown, does not make the report fail
FAIL = "fail"  # makes `ok` false and the exit status 1
SKIP = "skip"  # could not run here (device, missing tool, profile); the detail says why

# Worst first: a merged result takes the worst status any rank reported.
SEVERITY = {FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}

# The contract's checks, in report order.
CONTRACT_CHECKS = (
    "stack",
    "arch",
    "extensions",
    "load",
    "forward",
    "backward",
    "checkpoint_write",
    "checkpoint_restore",
    "allreduce",
    "memory_balance",
    "step_time",
)
# Hardware gates, reported after the contract's checks; they run when their tool exists on the node.
HARDWARE_CHECKS = ("idle_cards", "fabric", "gpu_health", "nvlink", "dcgm_diag")
ALL_CHECKS = CONTRACT_CHECKS + HARDWARE_CHECKS

# A rank's metrics carry this key when its check failed only because it waited in a collective for a rank that
# never joined: the value says how the wait ended.
WAITED = "waited_in_collective"
# How such a wait ends: the collective times out (gloo, NCCL), or the peer is gone (gloo closes the pair).
TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)
PEER_LOST = re.compile(r"connection (closed|reset) by peer|communicator was aborted", re.IGNORECASE)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


@dataclass
class Result:
    name: str
    status: str
    detail: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def worst(statuses: list[str]) -> str:
    return max(statuses, key=SEVERITY.__getitem__) if statuses else SKIP


def ranks_phrase(ranks: list[int]) -> str:
    return ", ".join(f"rank {rank}" for rank in ranks)


def merge_ranks(name: str, results: list[Result]) -> Result:
    """One result from each rank's: the worst status, a detail naming the ranks, metrics per rank.

    A failure's detail reads "<check> failed on rank 1: <what happened>: <what to do>", so that an
    operator knows which check, which card and the next step without opening the metrics.
    """
    status = worst([result.status for result in results])
    by_detail: dict[str, list[int]] = {}
    for rank, result in enumerate(results):
        if result.status == status and result.detail:
            by_detail.setdefault(result.detail, []).append(rank)
    if status in (FAIL, WARN):
        verb = "failed" if status == FAIL else "warns"
        parts = [f"{ranks_phrase(ranks)}: {detail}" for detail, ranks in by_detail.items()]
        detail = f"{name} {verb} on " + "; ".join(parts)
    elif len(by_detail) == 1:
        detail = next(iter(by_detail))
    else:
        detail = "; ".join(f"{ranks_phrase(ranks)}: {detail}" for detail, ranks in by_detail.items())
    return Result(name, status, detail, {"ranks": [result.metrics for result in results]})


def collective_wait(detail: str) -> str | None:
    """How a failed check's collective wait ended, read from its detail; None when it failed on its own."""
    if TIMED_OUT.search(detail):
        return "timed out"
    if PEER_LOST.search(detail):
        return "lost the connection"
    return None


def real_failures(results: list[Result]) -> list[int]:
    """The ranks that failed on their own, not because they waited for another in a collective."""
    return [rank for rank, result in enumerate(results) if result.status == FAIL and WAITED not in result.metrics]


def whom(blamed: list[int]) -> str:
    return "it" if len(blamed) == 1 else "them"


def waiting_notes(results: list[Result], blamed: list[int]) -> str:
    """A note for each other rank that only waited: "; rank 0 timed out waiting for it in a collective"."""
    return "".join(
        f"; rank {rank} {result.metrics[WAITED]} waiting for {whom(blamed)} in a collective"
        for rank, result in enumerate(results)
        if WAITED in result.metrics and rank not in blamed
    )


def merge_real_failures(name: str, results: list[Result]) -> Result | None:
    """Blame the ranks that failed on their own and say that the others waited for them; None if none did.

    A rank that runs out of memory in the middle of the forward pass leaves the others in an FSDP collective
    until it times out: their failure is its consequence, and blaming them would send the operator to the
    healthy card.
    """
    real = real_failures(results)
    if not real:
        return None
    merged = merge_ranks(name, [result if rank in real else Result(name, SKIP) for rank, result in enumerate(results)])
    merged.detail += waiting_notes(results, real)
    merged.metrics = {"ranks": [result.metrics for result in results]}
    return merged


def build_report(
    *,
    results: dict[str, Result],
    order_reference: str | None,
    versions: dict[str, Any],
    device: str,
    world_size: int,
    thresholds: dict[str, Any],
    threshold_sources: dict[str, str],
    profile: dict[str, Any],
    started_at: str,
    finished_at: str,
    duration_s: float,
    split: dict[str, Any] | None,
    injected: list[str],
) -> dict[str, Any]:
    checks = []
    for name in ALL_CHECKS:
        result = results.get(name) or Result(name, SKIP, "not run")
        checks.append(result.as_dict())
    report: dict[str, Any] = {
        "ok": not any(check["status"] == FAIL for check in checks),
        "order_reference": order_reference,
        "device": device,
        "world_size": world_size,
        "started_at": started_at,
        "finished_at": finished_at,
        "duration_s": round(duration_s, 3),
        "versions": versions,
        "thresholds": thresholds,
        # Where each card-specific threshold came from: the card's figure, the profile, this node's nccl-tests.
        "threshold_sources": threshold_sources,
        "profile": profile,
        "checks": checks,
        "split": split,
    }
    if injected:
        # Only the test-only --inject option puts this here: such a report proves nothing about a node.
        report["injected_faults"] = injected
    return report


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write atomically: a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(report, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(partial, path)


def summary(report: dict[str, Any], path: Path, width: int = 110) -> str:
    verdict = "PASSED" if report["ok"] else "FAILED"
    order = f" for order {report['order_reference']}" if report["order_reference"] else ""
    lines = [
        f"preflight {verdict}{order}: {report['device']} x{report['world_size']} "
        f"in {report['duration_s']:.1f} s, report {path}"
    ]
    for check in report["checks"]:
        detail = " ".join(check["detail"].split())
        if check["status"] != FAIL and len(detail) > width:
            detail = detail[: width - 3] + "..."
        lines.append(f"  {check['status']:<4}  {check['name']:<18}  {detail}")
    return "\n".join(lines)


def exit_status(report: dict[str, Any]) -> int:
    return EXIT_OK if report["ok"] else EXIT_FAILED

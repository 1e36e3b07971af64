"""`b200 verify`: the quick part of the hand-over preflight, run when the tenant chooses, compared figure by figure
with the hand-over report.

The preflight (provisioning/preflight, installed beside the node tools) runs with the validated Python on both
cards with a profile of its quick checks: the stack, the cards' architecture, a training step, the all-reduce,
the memory balance, the step time and the hardware gates; not DCGM's diagnostic (up to 10 minutes on its own) nor
the checkpoint round trip. It loads the cards for a few minutes, which `verify` says before it starts.

The hand-over figures come from the order file's `report`: the hand-over preflight's own `checks` (as the shop
writes them), of which the performance figures are compared (FIGURES: the others are settings, or durations that
vary with a compiler's cache), or a flat {"<check>.<metric>": number}, each of which is compared, e.g.
{"allreduce.busbw_gbps": 655.2, "step_time.steady_median_s": 1.92}. Each is compared with the same metric of
the same check now, and one more than 10 % away (either way), or not measured, is named. The comparison and the
preflight's own report go to <--out>/verify-<UTC time>.json.
"""

# The node may run an older Python than the shop: keep this file to Python 3.8.
# ruff: noqa: UP017 - datetime.UTC is Python 3.11

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import socket
import tempfile
from typing import Any

from provisioning.node_tools import b200_procs
from provisioning.node_tools.b200_text import section

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the folder above provisioning/
TOLERANCE = 0.10
QUICK_CHECKS = ["stack", "arch", "load", "forward", "backward", "allreduce", "memory_balance", "step_time"]
QUICK_CHECKS += ["idle_cards", "fabric", "gpu_health", "nvlink"]
FIGURES = (
    "allreduce.busbw_gbps",
    "allreduce.algbw_gbps",
    "memory_balance.min_max_ratio",
    "step_time.steady_median_s",
    "step_time.tokens_per_s",
    "step_time.matmul_tflops",
)
RANKS_TIMEOUT_S = 420  # the ranks' hard limit inside the preflight: with CUDA's start and the gates, under 10 min
TAIL_LINES = 20


class VerifyError(Exception):
    """verify cannot start (exit 2): no preflight beside the tool, no validated Python."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    verify = commands.add_parser(
        "verify",
        help="the quick hand-over preflight again (loads the cards for a few minutes), compared with its report",
        description=(
            "Runs the quick part of the hand-over preflight on the cards (they are loaded for a few minutes) and"
            " compares each figure with the hand-over report: one more than 10 % away is named."
        ),
    )
    verify.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a rehearsal (default cuda)")
    verify.add_argument("--world-size", type=int, default=2, help="cards (default 2)")
    verify.add_argument("--timeout", type=float, default=600.0, help="seconds before the preflight is stopped")
    verify.add_argument("--out", default="~/b200-trials", help="folder of the JSON result (default ~/b200-trials)")
    verify.add_argument("--python", help="the interpreter (default: the validated Python)")
    return verify


def verify(args: argparse.Namespace, state: dict[str, Any]) -> int:
    python = args.python or validated_python(state)
    if not os.path.isfile(os.path.join(ROOT, "provisioning", "preflight", "__main__.py")):
        raise VerifyError(f"the preflight is not installed beside b200 (looked in {ROOT}/provisioning/preflight)")
    print(
        f"b200 verify: the quick preflight loads {args.world_size} {args.device} card(s) for a few minutes"
        f" (at most {args.timeout:.0f} s); your own processes on them slow down meanwhile.",
        flush=True,
    )
    report, output = run_preflight(args, python, state)
    figures = compare(handover_figures(section(state, "report")), measured_figures(report or {}))
    failed = [check["name"] for check in (report or {}).get("checks", []) if check.get("status") == "fail"]
    result = {
        "reference": state.get("reference"),
        "node": state.get("node") or socket.gethostname(),
        "ok": report is not None and not failed and all(figure["ok"] for figure in figures),
        "preflight_ok": bool(report and report.get("ok")),
        "failed_checks": failed,
        "figures": figures,
        "last_output": None if report else output,
        "preflight": report,
    }
    path = write_result(os.path.expanduser(args.out), result)
    print(summary(result, path))
    return 0 if result["ok"] else 1


def validated_python(state: dict[str, Any]) -> str:
    python = section(state, "environment").get("python")
    if not isinstance(python, str) or not python:
        raise VerifyError("the order file names no validated Python: pass --python")
    return python


def quick_profile(timeout_s: float) -> dict[str, Any]:
    return {"name": "b200-verify-quick", "checks": QUICK_CHECKS, "timeout_s": min(RANKS_TIMEOUT_S, timeout_s)}


def run_preflight(args: argparse.Namespace, python: str, state: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The preflight's report (None when it wrote none) and the end of its output."""
    folder = tempfile.mkdtemp(prefix="b200-verify-")
    try:
        profile, report_path, log = (os.path.join(folder, name) for name in ("quick.json", "report.json", "log"))
        with open(profile, "w") as handle:
            json.dump(quick_profile(args.timeout), handle)
        argv = [python, "-m", "provisioning.preflight", "--device", args.device, "--world-size", str(args.world_size)]
        argv += ["--json", report_path, "--profile", profile]
        if isinstance(state.get("reference"), str):
            argv += ["--order", state["reference"]]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]))
        b200_procs.run_bounded(argv, env, log, args.timeout)
        return read_report(report_path), b200_procs.tail(log, TAIL_LINES)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def read_report(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def measured_figures(report: dict[str, Any]) -> dict[str, float]:
    """Every number a check that ran reports at its top level, as "<check>.<metric>"."""
    figures = {}
    for check in report.get("checks", []):
        if check.get("status") == "skip":
            continue
        for key, value in (check.get("metrics") or {}).items():
            if is_number(value):
                figures[f"{check.get('name')}.{key}"] = value
    return figures


def handover_figures(report: dict[str, Any]) -> dict[str, Any]:
    if isinstance(report.get("checks"), list):
        figures = measured_figures(report)
        return {name: figures[name] for name in FIGURES if name in figures}
    return report


def compare(expected: dict[str, Any], measured: dict[str, float]) -> list[dict[str, Any]]:
    compared = []
    for name, handover in sorted(expected.items()):
        if not is_number(handover):
            continue
        now = measured.get(name)
        deviation = None if now is None else relative_deviation(handover, now)
        compared.append(
            {
                "name": name,
                "handover": handover,
                "now": now,
                "deviation": None if deviation is None else round(deviation, 4),
                "ok": deviation is not None and deviation <= TOLERANCE,
            }
        )
    return compared


def relative_deviation(handover: float, now: float) -> float:
    if handover == 0:
        return 0.0 if now == 0 else float("inf")
    return abs(now - handover) / abs(handover)


def write_result(folder: str, result: dict[str, Any]) -> str:
    os.makedirs(folder, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(folder, f"verify-{stamp}.json")
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2, default=str)
        handle.write("\n")
    os.replace(partial, path)
    return path


def summary(result: dict[str, Any], path: str) -> str:
    lines = ["b200 verify: " + ("every figure within 10 % of the hand-over" if result["ok"] else "NOT as handed over")]
    if result["preflight"] is None:
        lines.append("  the preflight wrote no report; its last output:")
        lines += [f"    {line}" for line in (result["last_output"] or "").splitlines()]
    lines += [f"  check failed: {name}" for name in result["failed_checks"]]
    for figure in result["figures"]:
        shown = "not measured" if figure["now"] is None else f"{figure['now']} ({figure['deviation']:.0%} away)"
        verdict = "ok" if figure["ok"] else "OUT OF RANGE"
        lines.append(f"  {figure['name']}: hand-over {figure['handover']}, now {shown}: {verdict}")
    if not result["figures"]:
        lines.append("  the order file has no hand-over figures to compare with")
    return "\n".join([*lines, f"report: {path}"]).replace("inf%", "inf %")

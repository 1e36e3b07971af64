"""This node's own all-reduce figure from NVIDIA's nccl-tests, when installed: it calibrates the busbw floor.

The built-in floors come from ring figures measured between whole nodes' cards (cards.py); a two-card slice,
in a VM with NVLink SHARP off for instance, may reach less while being healthy. When `all_reduce_perf` is on
PATH, the host runs it once before the ranks, at nccl-tests' own 8 GiB point, and the floor becomes 0.9 x its
average bus bandwidth (nccl-tests' NCCL_TESTS_MIN_BW convention). The report keeps the figure, the command
and the floor it replaced; a node under its card's documented floor gets a warning, never silence.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

from provisioning.preflight.cards import BANDWIDTH_FLOOR

TOOL = "all_reduce_perf"
AVERAGE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)", re.MULTILINE)
WRONG = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)", re.MULTILINE)


def command(world_size: int) -> list[str]:
    return [TOOL, "-b", "8G", "-e", "8G", "-g", str(world_size)]


def parse(text: str) -> tuple[float | None, str]:
    """(average busbw in GB/s, or None; what was wrong when None)."""
    wrong = WRONG.search(text)
    if wrong and int(wrong.group(1)):
        return None, f"it reported {wrong.group(1)} wrong values"
    found = AVERAGE.search(text)
    if not found:
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        return None, f"no average bus bandwidth in its output ({lines[-1] if lines else 'empty'})"
    return float(found.group(1)), ""


def measure(world_size: int, timeout_s: float = 300) -> dict[str, Any] | None:
    """Run nccl-tests on the node's cards; None when it is not installed."""
    if shutil.which(TOOL) is None:
        return None
    argv = command(world_size)
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        return {"command": " ".join(argv), "busbw_gbps": None, "problem": f"no answer within {timeout_s:g} s"}
    except OSError as exc:
        return {"command": " ".join(argv), "busbw_gbps": None, "problem": f"could not start: {exc}"}
    busbw, problem = parse(completed.stdout)
    if busbw is None and completed.returncode != 0:
        problem = f"exited {completed.returncode}: {problem}"
    return {"command": " ".join(argv), "busbw_gbps": busbw, "problem": problem}


def calibrate(
    thresholds: dict[str, Any], sources: dict[str, str], given: frozenset[str], measured: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The busbw floor from this node's nccl-tests figure, unless the profile set the floor itself."""
    if measured is None or "busbw_floor_gbps" in given:
        return thresholds, sources
    thresholds, sources = dict(thresholds), dict(sources)
    if measured["busbw_gbps"] is None:
        sources["nccl_tests"] = f"`{measured['command']}` gave no figure: {measured['problem']}; floor unchanged"
        return thresholds, sources
    card_floor = thresholds.get("busbw_floor_gbps")
    floor = round(BANDWIDTH_FLOOR * measured["busbw_gbps"], 1)
    thresholds["busbw_floor_gbps"] = floor
    sources["busbw_floor_gbps"] = (
        f"this node's `{measured['command']}`: {measured['busbw_gbps']} GB/s x {BANDWIDTH_FLOOR}"
        f" (replaces {card_floor if card_floor is not None else 'no'} GB/s: {sources.get('busbw_floor_gbps', '')})"
    )
    if card_floor is not None and floor < card_floor:
        sources["busbw_below_card"] = (
            f"this node's nccl-tests floor {floor} GB/s is under its card's documented {card_floor} GB/s: a"
            " two-card slice can be slower than the figure's 8-card ring (NVLS off in VMs), but check NVLink"
        )
    return thresholds, sources

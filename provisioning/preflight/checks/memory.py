"""`memory_balance`: the per-card peaks of the workload are gathered and must be balanced.

On cuda the peak is `max_memory_allocated` (with `max_memory_reserved` recorded) since the
`reset_peak_memory_stats()` at load, read after the timed steps and before the all-reduce buffer, so it is
the model's footprint. On cpu it is the process's RSS peak (it includes the PyTorch runtime) against the
host's memory: the same rule, exercised in the rehearsal.

The rule: fail when one card peaks under `balance_low_fraction` of its capacity while another peaks over
`balance_high_fraction` (everything landed on one card); warn when the smallest peak is under
`balance_min_ratio` of the largest (uneven, but not broken).
"""

from __future__ import annotations

import os
import resource
from typing import Any

import torch

from provisioning.preflight.context import RankContext
from provisioning.preflight.report import FAIL, PASS, WARN, Result, merge_ranks


def run(ctx: RankContext) -> Result:
    if ctx.is_cuda:
        metrics: dict[str, Any] = {
            "measure": "max_memory_allocated since reset_peak_memory_stats at load",
            "peak_bytes": torch.cuda.max_memory_allocated(ctx.device),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(ctx.device),
            "capacity_bytes": torch.cuda.get_device_properties(ctx.device).total_memory,
        }
    else:
        metrics = {
            "measure": "process RSS peak (ru_maxrss), includes the PyTorch runtime",
            "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "capacity_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        }
    return Result("memory_balance", PASS, "", metrics)


def evaluate(peaks: list[int], capacities: list[int], thresholds: dict[str, Any]) -> tuple[str, str]:
    fractions = [peak / capacity for peak, capacity in zip(peaks, capacities, strict=True)]
    low, high = thresholds.get("balance_low_fraction"), thresholds.get("balance_high_fraction")
    shown = ", ".join(
        f"rank {rank} {peak / 2**30:.2f} GiB ({fraction:.1%})"
        for rank, (peak, fraction) in enumerate(zip(peaks, fractions, strict=True))
    )
    if low is not None and high is not None and min(fractions) < low and max(fractions) > high:
        idle, full = fractions.index(min(fractions)), fractions.index(max(fractions))
        return FAIL, (
            f"memory_balance failed on rank {full}: it peaks at {max(fractions):.0%} of its memory while rank {idle}"
            f" uses {min(fractions):.1%} ({shown}): the model is not split across the cards; shard it (FSDP2)"
        )
    ratio = min(peaks) / max(peaks) if max(peaks) else 1.0
    min_ratio = thresholds.get("balance_min_ratio")
    if min_ratio is not None and ratio < min_ratio:
        small = peaks.index(min(peaks))
        return WARN, (
            f"memory_balance warns on rank {small}: its peak is {ratio:.0%} of the largest ({shown});"
            f" the split is uneven (rule: >= {min_ratio:.0%})"
        )
    return PASS, f"balanced: min/max {ratio:.2f}; {shown}"


def merge(ctx: RankContext, results: list[Result]) -> Result:
    if any("peak_bytes" not in result.metrics for result in results):
        return merge_ranks("memory_balance", results)
    peaks = [result.metrics["peak_bytes"] for result in results]
    capacities = [result.metrics["capacity_bytes"] for result in results]
    status, detail = evaluate(peaks, capacities, ctx.settings.thresholds)
    metrics = {
        "measure": results[0].metrics["measure"],
        "min_max_ratio": round(min(peaks) / max(peaks), 4) if max(peaks) else 1.0,
        "ranks": [result.metrics for result in results],
    }
    return Result("memory_balance", status, detail, metrics)

"""`memory_balance`: the per-card peaks of the workload are gathered and must be balanced.

On cuda two measures per card, both read by `step_time` after its last steady step and before its matmul
probe allocates anything (so the probe and the checkpoint's snapshot are not in them; peaks are reset when
the timed steps begin):
- `max_memory_allocated` (and `max_memory_reserved`) of this rank's process: the training step's peak;
- the card's used memory from `torch.cuda.mem_get_info()` (total - free): every process on the card, the
  CUDA context and NCCL's buffers included. It is the one that sees another rank's tensors landing on this
  card, which no process's own counters show.
When `step_time` did not run, they are read at this check. On cpu it is the process's RSS peak (it
includes the PyTorch runtime) against the host's memory: the same rule, exercised in the rehearsal.

The rule, on each measure: fail when one card is under `balance_low_fraction` of its capacity while another
is over `balance_high_fraction` (everything landed on one card); warn when the smallest is under
`balance_min_ratio` of the largest (uneven, but not broken). On cuda the rehearsal's batch is sized from the
card's memory (model.sized_batch), so a card that got everything would be over the high line.
"""

from __future__ import annotations

import os
import resource
from typing import Any

import torch

from provisioning.preflight.context import RankContext
from provisioning.preflight.report import FAIL, PASS, SEVERITY, WARN, Result, merge_ranks

# Each measure and how a failure names it: (what the fullest card does, what the emptiest card does).
MEASURES = {
    "peak_bytes": ("it peaks at", " uses", "peak allocated by torch"),
    "device_used_bytes": ("its card's used memory (mem_get_info) is at", "'s card is at", "card's used memory"),
}


def reset_peaks(ctx: RankContext) -> None:
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)


def read(ctx: RankContext) -> dict[str, Any]:
    """This rank's memory figures now: the allocator's peaks and the card's use on cuda, RSS on cpu."""
    if not ctx.is_cuda:
        return {
            "measure": "process RSS peak (ru_maxrss), includes the PyTorch runtime",
            "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "capacity_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        }
    free, total = torch.cuda.mem_get_info(ctx.device)
    return {
        "measure": "max_memory_allocated over the timed training steps, and the card's use from mem_get_info",
        "peak_bytes": torch.cuda.max_memory_allocated(ctx.device),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(ctx.device),
        "device_used_bytes": total - free,
        "device_free_bytes": free,
        "capacity_bytes": total,
        "batch_per_rank": ctx.batch_size,
    }


def run(ctx: RankContext) -> Result:
    if ctx.workload_memory is not None:
        return Result("memory_balance", PASS, "", {**ctx.workload_memory, "read_at": "end of step_time"})
    return Result("memory_balance", PASS, "", {**read(ctx), "read_at": "memory_balance (step_time did not run)"})


def evaluate(
    peaks: list[int],
    capacities: list[int],
    thresholds: dict[str, Any],
    words: tuple[str, str, str] = MEASURES["peak_bytes"],
) -> tuple[str, str]:
    fractions = [peak / capacity for peak, capacity in zip(peaks, capacities, strict=True)]
    low, high = thresholds.get("balance_low_fraction"), thresholds.get("balance_high_fraction")
    shown = ", ".join(
        f"rank {rank} {peak / 2**30:.2f} GiB ({fraction:.1%})"
        for rank, (peak, fraction) in enumerate(zip(peaks, fractions, strict=True))
    )
    if low is not None and high is not None and min(fractions) < low and max(fractions) > high:
        idle, full = fractions.index(min(fractions)), fractions.index(max(fractions))
        return FAIL, (
            f"memory_balance failed on rank {full}: {words[0]} {max(fractions):.0%} of its memory while rank {idle}"
            f"{words[1]} {min(fractions):.1%} ({shown}): the model is not"
            " split across the cards; shard it (FSDP2), and check that each rank uses its own card (cuda:RANK)"
        )
    ratio = min(peaks) / max(peaks) if max(peaks) else 1.0
    min_ratio = thresholds.get("balance_min_ratio")
    if min_ratio is not None and ratio < min_ratio:
        small = peaks.index(min(peaks))
        return WARN, (
            f"memory_balance warns on rank {small}: its peak is {ratio:.0%} of the largest ({shown});"
            f" the split is uneven (rule: >= {min_ratio:.0%})"
        )
    # Named by its measure: merge() joins one verdict per measure, which would otherwise read as two "balanced".
    return PASS, f"balanced ({words[2]}): min/max {ratio:.2f}; {shown}"


def merge(ctx: RankContext, results: list[Result]) -> Result:
    if any("peak_bytes" not in result.metrics for result in results):
        return merge_ranks("memory_balance", results)
    capacities = [result.metrics["capacity_bytes"] for result in results]
    verdicts = []
    for key, words in MEASURES.items():
        if all(key in result.metrics for result in results):
            values = [result.metrics[key] for result in results]
            verdicts.append(evaluate(values, capacities, ctx.settings.thresholds, words))
    status = max((status for status, _ in verdicts), key=SEVERITY.__getitem__)
    shown = [detail for verdict, detail in verdicts if verdict == status]
    peaks = [result.metrics["peak_bytes"] for result in results]
    metrics = {
        "measure": results[0].metrics["measure"],
        "min_max_ratio": round(min(peaks) / max(peaks), 4) if max(peaks) else 1.0,
        "ranks": [result.metrics for result in results],
    }
    return Result("memory_balance", status, "; ".join(shown), metrics)

"""`step_time`: the first step (compilation, when on) timed apart from the median of the steady steps.

Precision and batch are fixed by the profile and recorded. `torch.compile` runs when the profile says so
(default "auto": on cuda, off on cpu, where its first step costs 20-35 s with an empty cache; Inductor
honours TORCHINDUCTOR_CACHE_DIR). A bf16 matmul probe measures the card's TFLOP/s; on cuda it must reach
`matmul_tflops_floor` (0.75 x the card's measured peak, DCGM's convention: cards.py); for a card without a
figure it is recorded with a warning. On cpu it is recorded only.

The training steps' memory is read here, after the last steady step and before the probe allocates its
matrices (memory.py judges it): the peaks are reset first, so the checkpoint's snapshot is not in them.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from provisioning.preflight import model as model_module
from provisioning.preflight.checks import memory
from provisioning.preflight.context import RankContext
from provisioning.preflight.report import FAIL, PASS, WARN, Result, merge_ranks, worst

# Triton builds a small launcher with the host's C compiler and Python headers the first time it compiles.
COMPILER_FIX = (
    "install the compiler toolchain torch.compile needs: gcc and the Python development headers (python3-dev,"
    " for Triton's launcher on cuda; a C++ compiler on cpu); the preparation's setup step installs them"
)


def timed_step(ctx: RankContext, model: Callable[[torch.Tensor], torch.Tensor]) -> tuple[float, float]:
    started = time.perf_counter()
    loss = model_module.train_step(ctx, model)
    value = loss.item()  # waits for the step's kernels
    ctx.synchronize()
    return time.perf_counter() - started, value


def matmul_tflops(ctx: RankContext) -> float | None:
    config = ctx.settings.matmul
    size = config["size"]
    if not size:
        return None
    generator = torch.Generator().manual_seed(7)
    a = torch.randn(size, size, generator=generator).to(device=ctx.device, dtype=ctx.dtype)
    b = torch.randn(size, size, generator=generator).to(device=ctx.device, dtype=ctx.dtype)
    for _ in range(config["warmup"]):
        torch.mm(a, b)
    ctx.synchronize()
    iterations = max(1, config["iters"])
    started = time.perf_counter()
    for _ in range(iterations):
        torch.mm(a, b)
    ctx.synchronize()
    elapsed = time.perf_counter() - started
    del a, b
    return 2 * size**3 * iterations / elapsed / 1e12


def run(ctx: RankContext) -> Result:
    steps = ctx.settings.steps
    config = ctx.settings.model
    model = torch.compile(ctx.model) if ctx.settings.compile else ctx.model
    metrics: dict[str, Any] = {
        "compiled": ctx.settings.compile,
        "precision": ctx.precision,
        "batch_per_rank": ctx.batch_size,
        "seq": config["seq"],
        "tokens_per_step": model_module.tokens_per_step(ctx),
        "warmup_steps": steps["warmup"],
        "first_eager_step_s": round(ctx.first_step_s or 0.0, 4),
        "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    }
    memory.reset_peaks(ctx)
    try:
        first, _ = timed_step(ctx, model)
    except Exception as exc:  # compilation or the first step failed on this card
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        fix = COMPILER_FIX if ctx.settings.compile else "see the error"
        return Result("step_time", FAIL, f"the first step failed ({message}): {fix}", metrics)
    for _ in range(steps["warmup"]):
        timed_step(ctx, model)
    steady = [timed_step(ctx, model) for _ in range(max(1, steps["measure"]))]
    ctx.workload_memory = memory.read(ctx)
    median = statistics.median(seconds for seconds, _ in steady)
    parameters = sum(parameter.numel() for parameter in ctx.model.parameters())  # global sizes, DTensors too
    metrics.update(
        {
            "first_step_s": round(first, 4),
            "steady_median_s": round(median, 5),
            "steady_steps_s": [round(seconds, 5) for seconds, _ in steady],
            "last_loss": steady[-1][1],
            "tokens_per_s": round(metrics["tokens_per_step"] / median, 1),
            "model_tflops": round(6 * parameters * metrics["tokens_per_step"] / median / 1e12, 4),
        }
    )
    tflops = matmul_tflops(ctx)
    floor = ctx.settings.thresholds.get("matmul_tflops_floor") if ctx.is_cuda else None
    metrics["matmul_tflops"] = None if tflops is None else round(tflops, 2)
    metrics["matmul_tflops_floor"] = floor
    metrics["matmul_tflops_floor_source"] = ctx.settings.threshold_sources.get("matmul_tflops_floor")
    how = "compilation" if ctx.settings.compile else "eager"
    detail = (
        f"first step {first:.3f} s ({how}), steady median {median:.4f} s over {len(steady)} steps after"
        f" {steps['warmup']} warm-up; {ctx.precision}, batch {ctx.batch_size} x {config['seq']} per rank"
    )
    unknown = ctx.settings.missing_figure("matmul_tflops_floor") if ctx.is_cuda else None
    status, matmul = matmul_rule(tflops, floor, unknown, f"{ctx.settings.matmul['size']}^3 {ctx.precision}")
    return Result("step_time", status, f"{matmul}; {detail}" if status == FAIL else f"{detail}{matmul}", metrics)


def matmul_rule(tflops: float | None, floor: float | None, unknown: str | None, shape: str) -> tuple[str, str]:
    """The matmul probe against the card's floor: (status, what to add to the detail)."""
    if tflops is None:
        return PASS, ""
    if floor is not None and tflops < floor:
        return FAIL, (
            f"a {shape} matmul ran at {tflops:.0f} TFLOP/s, below the floor {floor}: check clocks, power and"
            " temperature (nvidia-smi -q -d PERFORMANCE,CLOCK,POWER)"
        )
    if unknown:
        return WARN, f"; a {shape} matmul ran at {tflops:.0f} TFLOP/s with no floor ({unknown})"
    return PASS, ""


def merge(ctx: RankContext, results: list[Result]) -> Result:
    merged = merge_ranks("step_time", results)
    timed = [result.metrics for result in results if "steady_median_s" in result.metrics]
    if worst([result.status for result in results]) == FAIL or len(timed) != len(results):
        return merged
    first = max(metrics["first_step_s"] for metrics in timed)
    median = max(metrics["steady_median_s"] for metrics in timed)
    merged.metrics.update(
        {
            "compiled": timed[0]["compiled"],
            "precision": timed[0]["precision"],
            "tokens_per_step": timed[0]["tokens_per_step"],
            "first_step_s": first,
            "steady_median_s": median,
            "tokens_per_s": round(timed[0]["tokens_per_step"] / median, 1),
        }
    )
    if merged.status == WARN:
        return merged  # the warning's detail says what is missing; the figures are merged above
    how = "compilation" if timed[0]["compiled"] else "eager"
    config = ctx.settings.model
    merged.detail = (
        f"first step {first:.3f} s ({how}), steady median {median:.4f} s (slowest rank) over"
        f" {len(timed[0]['steady_steps_s'])} steps after {ctx.settings.steps['warmup']} warm-up;"
        f" {timed[0]['precision']}, batch {timed[0]['batch_per_rank']} x {config['seq']} per rank"
    )
    return merged

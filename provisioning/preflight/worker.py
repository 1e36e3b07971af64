"""One rank: joins the process group, runs the rank checks in lockstep, rank 0 records the merged results.

After every check the ranks exchange their results (`all_gather_object`) and merge them the same way, so
every rank knows whether a later check's prerequisite passed and all of them take the same path: a failure
on one rank never leaves another waiting in a collective the first will not join. The exchange runs on a
gloo side group (CPU sockets, no CUDA kernel), so a card in a sticky CUDA error state, or a broken NCCL
communicator, cannot take the verdict down with it.

Each rank appends its own result to `rank-<r>.results.jsonl` before any collective, rank 0 appends each
merged result to `results.jsonl`, and every rank notes where it is in `rank-<r>.stage`: if the exchange
dies or the launcher has to kill the ranks, it still knows what finished, what each rank found, and who
hung where.

The checks' collectives (the main group: NCCL on cuda, gloo on cpu) time out at a quarter of the launcher's
deadline: a rank left waiting for one that failed in the middle of a check gets its turn to say so, and
the checks after a timed-out collective, which would need the broken group, are not run.
"""

from __future__ import annotations

import datetime
import json
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from provisioning.preflight.checks import allreduce, arch, checkpoint, compiled_extensions, memory, step_time, training
from provisioning.preflight.context import RankContext
from provisioning.preflight.profile import Settings
from provisioning.preflight.report import (
    FAIL,
    PASS,
    SKIP,
    WAITED,
    WARN,
    Result,
    collective_wait,
    merge_ranks,
    merge_real_failures,
    ranks_phrase,
    real_failures,
)

RESULTS_FILE = "results.jsonl"
# Well below the launcher's deadline, so a rank stuck behind a failed one times out while the launcher
# still waits; long enough for the legitimate skew between ranks (a compile, a checkpoint write).
COLLECTIVE_TIMEOUT_FRACTION = 0.25
# TEST ONLY (--inject exchange-fails): what NCCL raises on every collective after a sticky CUDA error.
INJECTED_CUDA_ERROR = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might"
    " be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[RankContext], Result]
    needs: tuple[str, ...] = ()
    merge: Callable[[RankContext, list[Result]], Result] | None = None
    collectives: bool = True  # issues collectives on the main group


# Execution order (the report keeps the contract's order). The memory peaks are read after the timed steps
# and before the all-reduce buffer exists, so they are the model's.
STAGES = (
    Stage("arch", arch.run, collectives=False),
    Stage("extensions", compiled_extensions.run, collectives=False),
    Stage("load", training.load),
    Stage("forward", training.forward, needs=("load",)),
    Stage("backward", training.backward, needs=("forward",)),
    Stage("checkpoint_write", checkpoint.write, needs=("backward",)),
    Stage("checkpoint_restore", checkpoint.restore, needs=("checkpoint_write",), merge=checkpoint.merge),
    Stage("step_time", step_time.run, needs=("backward",), merge=step_time.merge),
    Stage("memory_balance", memory.run, needs=("load",), merge=memory.merge, collectives=False),
    Stage("allreduce", allreduce.run, merge=allreduce.merge),
)
RANK_CHECKS = tuple(stage.name for stage in STAGES)


@dataclass(frozen=True)
class WorkerSpec:
    world_size: int
    device: str
    settings: Settings
    run_dir: str
    store_port: int
    timeout_s: float
    expect_arch: str | None = None
    injections: dict[str, int] = field(default_factory=dict)

    @property
    def collective_timeout_s(self) -> float:
        return self.timeout_s * COLLECTIVE_TIMEOUT_FRACTION


def stage_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank-{rank}.stage"


def error_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank-{rank}.error"


def rank_results_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank-{rank}.results.jsonl"


def append_result(path: Path, result: Result) -> None:
    with path.open("a") as output:
        output.write(json.dumps(result.as_dict(), default=str) + "\n")


def main(rank: int, spec: WorkerSpec) -> None:
    """The spawned process's entry point (torch.multiprocessing passes the rank first)."""
    run_dir = Path(spec.run_dir)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(spec.world_size))
    stage_file(run_dir, rank).write_text("init")
    try:
        ctx = join(rank, spec)
        run_stages(ctx)
        stage_file(run_dir, rank).write_text("done")
        dist.destroy_process_group()
    except BaseException:
        error_file(run_dir, rank).write_text(traceback.format_exc())
        raise


def join(rank: int, spec: WorkerSpec) -> RankContext:
    """The main group for the checks and a gloo side group for the results exchange.

    Both start with the full deadline, as the rendezvous waits for ranks that start seconds apart; then the
    main group's collectives get the shorter timeout, while the exchange keeps the deadline: a rank that
    hangs is left to the launcher, which knows who is stuck where.
    """
    timeout = datetime.timedelta(seconds=spec.timeout_s)
    if spec.device == "cuda":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // spec.world_size))
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile worker pool per rank
    store = dist.TCPStore("127.0.0.1", spec.store_port, spec.world_size, is_master=False, timeout=timeout)
    dist.init_process_group(
        "nccl" if spec.device == "cuda" else "gloo",
        store=store,
        rank=rank,
        world_size=spec.world_size,
        timeout=timeout,
        device_id=device if spec.device == "cuda" else None,
    )
    exchange_group = dist.new_group(backend="gloo", timeout=timeout)  # returns once every rank joined
    # Private, but what torchtitan uses to lower the timeout after the rendezvous (no public way yet).
    dist.distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=spec.collective_timeout_s))
    return RankContext(
        rank=rank,
        world_size=spec.world_size,
        device=device,
        settings=spec.settings,
        run_dir=Path(spec.run_dir),
        expect_arch=spec.expect_arch,
        injections=dict(spec.injections),
        exchange_group=exchange_group,
        collective_timeout_s=spec.collective_timeout_s,
    )


def run_stage(ctx: RankContext, stage: Stage, statuses: dict[str, str], group_lost: str | None) -> Result:
    if not ctx.settings.runs(stage.name):
        return Result(stage.name, SKIP, "not in the profile's checks")
    if group_lost and stage.collectives:
        return Result(stage.name, SKIP, f"not reached: {group_lost}")
    blocked = [need for need in stage.needs if statuses.get(need) not in (PASS, WARN)]
    if blocked:
        return Result(stage.name, SKIP, f"needs {blocked[0]}, which did not pass ({statuses.get(blocked[0])})")
    try:
        result = stage.run(ctx)
    except Exception as exc:  # an unexpected error is this check's failure on this rank, with the traceback
        result = Result(stage.name, FAIL, f"{stage.name} raised {exception_line(exc)}", {"traceback": tail(exc)})
    waited = collective_wait(result.detail) if stage.collectives and result.status == FAIL else None
    if waited:
        result.metrics[WAITED] = waited
    return result


def exception_line(exc: BaseException) -> str:
    """The type and the first line of the message: CUDA appends lines of boilerplate after the error."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def tail(exc: BaseException) -> list[str]:
    """The innermost frames, then the exception's line."""
    frames = "".join(traceback.format_tb(exc.__traceback__)).rstrip().splitlines()
    return [*frames[-5:], exception_line(exc)]


def exchange(ctx: RankContext, result: Result) -> list[Result]:
    """Every rank's result of this check, over the gloo side group."""
    if ctx.injected("exchange-fails"):
        raise RuntimeError(INJECTED_CUDA_ERROR)
    results: list[Result] = [Result(result.name, SKIP)] * ctx.world_size
    dist.all_gather_object(results, result, group=ctx.exchange_group)
    return results


def merge(ctx: RankContext, stage: Stage, results: list[Result]) -> Result:
    if any(WAITED in result.metrics for result in results):  # a check's own merge expects complete results
        return merge_real_failures(stage.name, results) or merge_ranks(stage.name, results)
    return stage.merge(ctx, results) if stage.merge else merge_ranks(stage.name, results)


def run_stages(ctx: RankContext) -> None:
    run_dir = ctx.run_dir
    statuses: dict[str, str] = {}
    group_lost = None  # after a collective timed out: why the checks that need the main group are not run
    for stage in STAGES:
        began = time.monotonic()
        stage_file(run_dir, ctx.rank).write_text(stage.name)
        result = run_stage(ctx, stage, statuses, group_lost)
        append_result(rank_results_file(run_dir, ctx.rank), result)
        if ctx.settings.runs(stage.name):
            stage_file(run_dir, ctx.rank).write_text(f"{stage.name}:gather")
            results = exchange(ctx, result)
        else:
            results = [result] * ctx.world_size  # the same skip on every rank: nothing to exchange
        merged = merge(ctx, stage, results)
        # Wall time of the check (the slowest rank's, as the gather waits for it): where the preflight's time goes.
        merged.metrics["duration_s"] = round(time.monotonic() - began, 3)
        if stage.collectives and merged.status != SKIP:
            merged.metrics["collective_timeout_s"] = ctx.collective_timeout_s
        statuses[stage.name] = merged.status
        if group_lost is None and any(WAITED in result.metrics for result in results):
            culprits = real_failures(results) or [rank for rank, result in enumerate(results) if result.status == FAIL]
            group_lost = f"{stage.name} failed on {ranks_phrase(culprits)} and left a collective unfinished"
        if ctx.rank == 0:
            append_result(run_dir / RESULTS_FILE, merged)

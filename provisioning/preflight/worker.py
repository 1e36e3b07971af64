"""One rank: joins the process group, runs the rank checks in lockstep, rank 0 records the merged results.

After every check the ranks exchange their results (`all_gather_object`) and merge them the same way, so
every rank knows whether a later check's prerequisite passed and all of them take the same path: a failure
on one rank never leaves another waiting in a collective the first will not join. Rank 0 appends each merged
result to `results.jsonl` at once, and every rank notes where it is in `rank-<r>.stage`, so that the
launcher can still report what finished, and who hung where, if it has to kill the ranks.
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

from provisioning.preflight.checks import allreduce, arch, checkpoint, extensions, memory, step_time, training
from provisioning.preflight.context import RankContext
from provisioning.preflight.profile import Settings
from provisioning.preflight.report import FAIL, PASS, SKIP, WARN, Result, merge_ranks

RESULTS_FILE = "results.jsonl"


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[RankContext], Result]
    needs: tuple[str, ...] = ()
    merge: Callable[[RankContext, list[Result]], Result] | None = None


# Execution order (the report keeps the contract's order). The memory peaks are read after the timed steps
# and before the all-reduce buffer exists, so they are the model's.
STAGES = (
    Stage("arch", arch.run),
    Stage("extensions", extensions.run),
    Stage("load", training.load),
    Stage("forward", training.forward, needs=("load",)),
    Stage("backward", training.backward, needs=("forward",)),
    Stage("checkpoint_write", checkpoint.write, needs=("backward",)),
    Stage("checkpoint_restore", checkpoint.restore, needs=("checkpoint_write",), merge=checkpoint.merge),
    Stage("step_time", step_time.run, needs=("backward",), merge=step_time.merge),
    Stage("memory_balance", memory.run, needs=("load",), merge=memory.merge),
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


def stage_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank-{rank}.stage"


def error_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank-{rank}.error"


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
    return RankContext(
        rank=rank,
        world_size=spec.world_size,
        device=device,
        settings=spec.settings,
        run_dir=Path(spec.run_dir),
        expect_arch=spec.expect_arch,
        injections=dict(spec.injections),
    )


def run_stage(ctx: RankContext, stage: Stage, statuses: dict[str, str]) -> Result:
    if not ctx.settings.runs(stage.name):
        return Result(stage.name, SKIP, "not in the profile's checks")
    blocked = [need for need in stage.needs if statuses.get(need) not in (PASS, WARN)]
    if blocked:
        return Result(stage.name, SKIP, f"needs {blocked[0]}, which did not pass ({statuses.get(blocked[0])})")
    try:
        return stage.run(ctx)
    except Exception as exc:  # an unexpected error is this check's failure on this rank, with the traceback
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        lines = traceback.format_exc().strip().splitlines()[-6:]
        return Result(stage.name, FAIL, f"{stage.name} raised {message}", {"traceback": lines})


def run_stages(ctx: RankContext) -> None:
    run_dir = ctx.run_dir
    statuses: dict[str, str] = {}
    for stage in STAGES:
        began = time.monotonic()
        stage_file(run_dir, ctx.rank).write_text(stage.name)
        result = run_stage(ctx, stage, statuses)
        stage_file(run_dir, ctx.rank).write_text(f"{stage.name}:gather")
        results: list[Result] = [Result(stage.name, SKIP)] * ctx.world_size
        dist.all_gather_object(results, result)
        merged = stage.merge(ctx, results) if stage.merge else merge_ranks(stage.name, results)
        # Wall time of the check (the slowest rank's, as the gather waits for it): where the preflight's time goes.
        merged.metrics["duration_s"] = round(time.monotonic() - began, 3)
        statuses[stage.name] = merged.status
        if ctx.rank == 0:
            with (run_dir / RESULTS_FILE).open("a") as output:
                output.write(json.dumps(merged.as_dict(), default=str) + "\n")

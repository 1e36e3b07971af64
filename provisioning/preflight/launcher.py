"""Spawn one process per card, under a hard timeout, and collect the merged results rank 0 recorded.

The rendezvous is a TCPStore this process opens on a free loopback port (the OS picks it, so there is no
race for a port between choosing and binding). A rank that hangs, in a collective or a kernel, is killed
at the deadline; a rank that crashes takes the others down at once. Either way the checks that finished
keep their results, the check where it happened fails naming the rank, and the rest report `skip`.

The failed check's verdict comes from what each rank recorded before the exchange when it can: a rank that
failed on its own is blamed, not the rank left waiting for it (killed in a collective, or cut off in the
exchange). An exception is quoted by its first `...Error: ...` line, never by a CUDA error's boilerplate.
"""

from __future__ import annotations

import datetime
import json
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from provisioning.preflight import worker
from provisioning.preflight.profile import Settings
from provisioning.preflight.report import (
    FAIL,
    SKIP,
    Result,
    collective_wait,
    merge_real_failures,
    ranks_phrase,
    real_failures,
    waiting_notes,
    whom,
)

EXIT_GRACE_S = 30.0  # how long ranks that finished every check may take to exit
# A traceback's exception line: `RuntimeError: ...`, `torch.AcceleratorError: ...`, a bare `KeyError`.
ERROR_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)(?::\s|$)")


class SpecFields(TypedDict):
    """The WorkerSpec fields the caller chooses; launch adds the world size, run directory and store port."""

    device: str
    settings: Settings
    timeout_s: float
    expect_arch: str | None
    injections: dict[str, int]


def launch(spec_fields: SpecFields, *, world_size: int, run_dir: Path, timeout_s: float) -> dict[str, Result]:
    import torch.distributed as dist
    import torch.multiprocessing as mp

    store = dist.TCPStore(
        "127.0.0.1", 0, None, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout_s)
    )
    spec = worker.WorkerSpec(world_size=world_size, run_dir=str(run_dir), store_port=store.port, **spec_fields)
    context = mp.start_processes(  # type: ignore[no-untyped-call]  # torch leaves start_processes unannotated
        worker.main, args=(spec,), nprocs=world_size, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout_s
    exit_by = None  # set once every rank recorded its results
    problem: tuple[str, int | None, str] | None = None
    try:
        while not context.join(timeout=1.0, grace_period=5):
            now = time.monotonic()
            if exit_by is None and all_done(run_dir, world_size):
                exit_by = now + EXIT_GRACE_S
            if exit_by is not None and now >= exit_by:
                break  # results complete; a teardown that hangs (NCCL can) is killed without blame
            if exit_by is None and now >= deadline:
                problem = ("timeout", None, f"did not finish within the hard timeout of {timeout_s:g} s")
                break
    except mp.ProcessExitedException as exc:
        problem = ("crash", exc.error_index, f"exited with {exit_reason(exc.exit_code)}")
    except mp.ProcessRaisedException as exc:
        problem = ("crash", exc.error_index, f"raised {first_error_line(exc.msg)}")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
        for process in context.processes:
            process.join(timeout=10)
    results = read_results(run_dir / worker.RESULTS_FILE)
    if problem or len(results) < len(worker.RANK_CHECKS):
        fill_unfinished(results, run_dir, world_size, problem, spec.settings.checks)
    return results


def all_done(run_dir: Path, world_size: int) -> bool:
    paths = [worker.stage_file(run_dir, rank) for rank in range(world_size)]
    return all(path.exists() and path.read_text().strip() == "done" for path in paths)


def exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def first_error_line(text: str) -> str:
    """The first line that reads `SomethingError: ...` (a chained traceback's first is the cause); else the last.

    CUDA errors end with lines of boilerplate ("Compile with `TORCH_USE_CUDA_DSA` ..."): the last line of such a
    traceback says nothing about what went wrong.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    found = next((line for line in lines if ERROR_LINE.match(line)), None)
    return found or (lines[-1] if lines else "an exception")


def read_results(path: Path) -> dict[str, Result]:
    results: dict[str, Result] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            results[data["name"]] = Result(**data)
    return results


def recorded_results(run_dir: Path, world_size: int, name: str) -> list[Result]:
    """What each rank found in this check, recorded before the exchange; a bare skip where it recorded nothing."""
    return [
        read_results(worker.rank_results_file(run_dir, rank)).get(name) or Result(name, SKIP)
        for rank in range(world_size)
    ]


def rank_errors(run_dir: Path, world_size: int) -> dict[int, str]:
    """The error line of each rank that raised."""
    paths = {rank: worker.error_file(run_dir, rank) for rank in range(world_size)}
    return {rank: first_error_line(path.read_text()) for rank, path in paths.items() if path.exists()}


def at_gather(stage: str) -> bool:
    return stage.endswith(":gather") or stage == "done"


def stopped_ranks(errors: dict[int, str], culprit: int | None, where: dict[int, str]) -> list[int]:
    """The ranks that stopped the run: those that raised an error of their own; else the rank that crashed or
    the ranks still inside the check, never a rank waiting at the gather while another has not reached it."""
    own = [rank for rank, line in errors.items() if not collective_wait(line)]
    if own:
        return own
    behind = [rank for rank, stage in where.items() if not at_gather(stage)]
    if culprit is not None and (culprit in behind or not behind):
        return [culprit]
    return behind or list(where)


@dataclass(frozen=True)
class Stop:
    """How the ranks stopped: what the launcher saw (a crash, the deadline) and what the ranks' error files say."""

    kind: str
    culprit: int | None
    what: str
    errors: dict[int, str]

    def event(self, rank: int) -> str:
        line = self.errors.get(rank)
        if rank == self.culprit:
            return f"{self.what} after raising {line}" if line and line not in self.what else self.what
        if line:
            return f"raised {line}"
        return self.what if self.kind == "timeout" else "did not reach the results exchange"


def fill_unfinished(
    results: dict[str, Result],
    run_dir: Path,
    world_size: int,
    problem: tuple[str, int | None, str] | None,
    profile_checks: tuple[str, ...],
) -> None:
    """The first unfinished check fails, blaming the rank(s) that caused it; later ones were not reached.

    A rank that recorded a failure of its own in the check is blamed first: the others were waiting for it
    (timed out or killed in a collective, or cut off in the exchange). Without one, the ranks that stopped
    the run are blamed (see `stopped_ranks`). Either way the others' part is told, as waiting.
    """
    unfinished = [name for name in worker.RANK_CHECKS if name not in results]
    if not unfinished:
        return
    current = unfinished[0]
    where = {}
    for rank in range(world_size):
        path = worker.stage_file(run_dir, rank)
        where[rank] = path.read_text().strip() if path.exists() else "not started"
    stop = Stop(*(problem or ("lost", None, "stopped without recording its result")), rank_errors(run_dir, world_size))
    stopped = stopped_ranks(stop.errors, stop.culprit, where)
    recorded = recorded_results(run_dir, world_size, current)
    real = merge_real_failures(current, recorded)
    if real:
        blamed, detail, told = real_failures(recorded), real.detail, []
    else:
        blamed, told = stopped, stopped
        detail = f"{current} failed on {ranks_phrase(blamed)}: " + "; ".join(
            f"rank {rank} {stop.event(rank)}" for rank in blamed
        )
        detail += waiting_notes(recorded, blamed)
    involved = dict.fromkeys([*stopped, *([] if stop.culprit is None else [stop.culprit])])
    for rank in involved:
        if rank not in told:
            detail += f"; rank {rank} {stop.event(rank)} {place(rank, where[rank], current, blamed)}"
    detail += " (" + ", ".join(f"rank {rank} at {stage}" for rank, stage in where.items()) + ")"
    if not real:  # a rank's own failure says what to do; a crash or a hang gets the generic next step
        fix = (
            "a hung collective or kernel: rerun with NCCL_DEBUG=INFO, check `nvidia-smi` and `dmesg` for Xid errors"
            if stop.kind == "timeout"
            else "see the rank's error; check `dmesg` for Xid errors and rerun"
        )
        detail += f": {fix}"
    metrics = {"ranks_at": where, "problem": stop.kind, "ranks": [result.metrics for result in recorded]}
    results[current] = Result(current, FAIL, detail, metrics)
    for name in unfinished[1:]:
        reason = f"not reached: {current} failed on {ranks_phrase(blamed)}"
        results[name] = Result(name, SKIP, reason if name in profile_checks else "not in the profile's checks")


def place(rank: int, stage: str, current: str, blamed: list[int]) -> str:
    """Where a rank stopped and, unless it is blamed too, that it was waiting for the blamed rank(s) there."""
    if at_gather(stage):
        return "in the results exchange" + ("" if rank in blamed else f", waiting for {whom(blamed)}")
    waiting = "" if rank in blamed else f", most likely waiting for {whom(blamed)} in a collective"
    return f"while still in {current}{waiting}"

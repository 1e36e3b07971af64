"""Spawn one process per card, under a hard timeout, and collect the merged results rank 0 recorded.

The rendezvous is a TCPStore this process opens on a free loopback port (the OS picks it, so there is no
race for a port between choosing and binding). A rank that hangs, in a collective or a kernel, is killed
at the deadline; a rank that crashes takes the others down at once. Either way the checks that finished
keep their results, the check where it happened fails naming the rank, and the rest report `skip`.
"""

from __future__ import annotations

import datetime
import json
import signal
import time
from pathlib import Path

from provisioning.preflight import worker
from provisioning.preflight.report import FAIL, SKIP, Result, ranks_phrase

EXIT_GRACE_S = 30.0  # how long ranks that finished every check may take to exit


def launch(spec_fields: dict, *, world_size: int, run_dir: Path, timeout_s: float) -> dict[str, Result]:
    import torch.distributed as dist
    import torch.multiprocessing as mp

    store = dist.TCPStore(
        "127.0.0.1", 0, None, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout_s)
    )
    spec = worker.WorkerSpec(world_size=world_size, run_dir=str(run_dir), store_port=store.port, **spec_fields)
    context = mp.start_processes(worker.main, args=(spec,), nprocs=world_size, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    exit_by = None  # set once every rank recorded its results
    problem = None
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
        problem = ("crash", exc.error_index, f"raised {last_line(exc.msg)}")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
        for process in context.processes:
            process.join(timeout=10)
    results = read_results(run_dir)
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


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "an exception"


def read_results(run_dir: Path) -> dict[str, Result]:
    path = run_dir / worker.RESULTS_FILE
    results: dict[str, Result] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
            results[data["name"]] = Result(**data)
    return results


def fill_unfinished(
    results: dict[str, Result],
    run_dir: Path,
    world_size: int,
    problem: tuple[str, int | None, str] | None,
    profile_checks: tuple[str, ...],
) -> None:
    """The first unfinished check fails, naming the rank(s) and what happened; later ones were not reached."""
    unfinished = [name for name in worker.RANK_CHECKS if name not in results]
    if not unfinished:
        return
    current = unfinished[0]
    where = {}
    for rank in range(world_size):
        path = worker.stage_file(run_dir, rank)
        where[rank] = path.read_text().strip() if path.exists() else "not started"
    kind, culprit, what = problem or ("lost", None, "stopped without recording its result")
    if culprit is not None:
        blamed = [culprit]
    else:
        # Ranks still inside the check hold up the ones already waiting to exchange results.
        blamed = [rank for rank, stage in where.items() if not stage.endswith(":gather") and stage != "done"]
        blamed = blamed or list(range(world_size))
    errors = []
    for rank in blamed:
        path = worker.error_file(run_dir, rank)
        if path.exists():
            errors.append(f"rank {rank}: {last_line(path.read_text())}")
    positions = ", ".join(f"rank {rank} at {stage}" for rank, stage in where.items())
    fix = (
        "a hung collective or kernel: rerun with NCCL_DEBUG=INFO, check `nvidia-smi` and `dmesg` for Xid errors"
        if kind == "timeout"
        else "see the rank's error; check `dmesg` for Xid errors and rerun"
    )
    detail = f"{current} failed on {ranks_phrase(blamed)}: {ranks_phrase(blamed)} {what} ({positions})"
    if errors:
        detail += "; " + "; ".join(errors)
    results[current] = Result(current, FAIL, f"{detail}: {fix}", {"ranks_at": where, "problem": kind})
    for name in unfinished[1:]:
        reason = f"not reached: {current} failed on {ranks_phrase(blamed)}"
        results[name] = Result(name, SKIP, reason if name in profile_checks else "not in the profile's checks")

"""`b200 trial`: the two-card protocol on the researcher's own, unchanged training script.

The script runs twice through torchrun, with the same arguments and environment: on one card, then on two.
b200_steps.py, loaded into each rank before the script, counts and times the optimizer steps and ends the rank
after --steps of them; a run that takes longer than --timeout is stopped (SIGTERM, SIGKILL after a few seconds)
and nothing of it is left running (b200_procs.py). The figures of both runs, their scaling efficiency and plain
verdicts go to <--out>/<UTC time>.json (the keys are in the shop's contract) and a short summary is printed.

Figures per run (from the slowest rank, which sets the pace of the pair):
- first_step_s: from the script's start to the end of its first optimizer step (imports, model building, data
  loading and a first compilation included: what a real run pays once);
- step_s_median: the median step time after the --warmup steps; steps_per_s: those steps over their time;
- peak_memory_bytes: per rank, the allocator's peak on cuda (`cuda_allocator`; card_memory_used_bytes adds the
  card's used memory as nvidia-smi sees it), each rank's resident memory peak on cpu (`rss`).

scaling_efficiency = the pair's throughput / twice one card's = the pair's steps_per_s / one card's, when each
rank steps its own batch (DistributedDataParallel): the same precision and examples per card in both runs.
"""

# The node may run an older Python than the shop: keep this file to Python 3.8.
# ruff: noqa: UP017, S603, S607 - UP017: datetime.UTC is 3.11; the commands run are fixed names and the validated
# Python

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from provisioning.node_tools import b200_procs
from provisioning.node_tools.b200_text import section

HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "b200_steps.py")
TAIL_LINES = 40
RANK_FAILED = re.compile(r"failed \(exitcode: -?\d+\) local_rank: \d+")
PROBE_TIMEOUT_S = 120  # importing torch and asking CUDA for its cards: slow on a cold node, never this slow
UNBALANCED_RATIO = 0.5
EXCHANGES_DOMINATE = 0.6
INDEPENDENT_RUNS = 0.8
PROBE = """
import json, platform
facts = {"python": platform.python_version()}
try:
    import torch
except Exception as exc:
    facts["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
else:
    facts.update(torch=torch.__version__, cuda=torch.version.cuda, cuda_available=torch.cuda.is_available())
    try:
        facts["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
    except Exception:
        facts["nccl"] = None
print(json.dumps(facts))
"""


class TrialError(Exception):
    """The trial cannot start (exit 2): a missing script, an interpreter without PyTorch."""


def trial(args: argparse.Namespace, state: dict[str, Any] | None) -> int:
    script = os.path.abspath(args.script)
    if not os.path.isfile(script):
        raise TrialError(f"no script at {args.script}")
    python = args.python or python_of(state) or sys.executable
    facts = probe(python)
    device = args.device or ("cuda" if facts.get("cuda_available") else "cpu")
    runs = []
    for gpus in (1, 2):
        print(f"b200 trial: {gpus} card(s) on {device}, up to {args.steps} steps or {args.timeout} s", flush=True)
        runs.append(run_script(args, python=python, script=script, device=device, gpus=gpus))
    efficiency = scaling_efficiency(runs)
    state = state or {}
    result = {
        "reference": state.get("reference"),
        "node": state.get("node") or socket.gethostname(),
        "manifest_sha256": state.get("manifest_sha256"),
        "versions": versions(facts, state),
        "command": ["b200", *args.argv],
        "git_commit": git_commit(os.path.dirname(script)),
        "runs": runs,
        "scaling_efficiency": efficiency,
        "verdicts": verdicts(runs, efficiency),
    }
    path = write_result(os.path.expanduser(args.out), result)
    print(summary(result, path))
    return 0 if all(run["status"] == "ok" for run in runs) else 1


def python_of(state: dict[str, Any] | None) -> str | None:
    python = section(state, "environment").get("python")
    return python if isinstance(python, str) and python else None


def probe(python: str) -> dict[str, Any]:
    """The interpreter's Python, PyTorch, CUDA and NCCL versions, and whether CUDA sees a card."""
    try:
        done = subprocess.run(
            [python, "-c", PROBE], stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TrialError(f"cannot run {python}: {exc}") from exc
    try:
        facts: dict[str, Any] = json.loads(done.stdout.decode(errors="replace").strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise TrialError(f"{python} did not answer: {done.stderr.decode(errors='replace')[-300:]}") from None
    if "torch_error" in facts:
        raise TrialError(f"{python} has no usable PyTorch ({facts['torch_error']}): pass --python")
    return facts


def versions(facts: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The versions of the interpreter that ran the script; the driver from nvidia-smi, else the order's."""
    known = section(section(state, "environment"), "versions")
    found = {key: facts.get(key) for key in ("cuda", "torch", "nccl", "python")}
    return {"driver": driver_version() or known.get("driver"), **found}


def driver_version() -> str | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.decode(errors="replace").split()
    return lines[0] if done.returncode == 0 and lines else None


def launch_command(python: str, gpus: int, port: int, script: str, script_args: list[str]) -> list[str]:
    """torchrun on one node with a static rendezvous on a loopback port of our choosing (never a shared default
    port: two trials on one machine would meet), and the step counter in front of the script."""
    torchrun = [python, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(gpus)]
    return torchrun + ["--master-addr", "127.0.0.1", "--master-port", str(port), HOOK, script, *script_args]


def run_environment(device: str, folder: str, steps: int) -> dict[str, str]:
    env = dict(os.environ, B200_TRIAL_DIR=folder, B200_TRIAL_STEPS=str(steps), B200_TRIAL_DEVICE=device)
    env.setdefault("PYTHONUNBUFFERED", "1")  # a run stopped at its timeout still shows what it printed
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the script's own torch.cuda.is_available() then picks the cpu
        # A "card" on cpu is half the cores, in both runs: torchrun would give 1 thread per rank to the pair only.
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 2) // 2)))
    return env


def run_script(args: argparse.Namespace, *, python: str, script: str, device: str, gpus: int) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="b200-trial-")
    try:
        torchrun_log = os.path.join(folder, "torchrun.log")
        port = args.master_port or b200_procs.free_port()
        argv = launch_command(python, gpus, port, script, args.args)
        code, timed_out, left = b200_procs.run_bounded(
            argv, run_environment(device, folder, args.steps), torchrun_log, args.timeout
        )
        ranks = read_ranks(folder)
        output = last_output(os.path.join(folder, "output.log"), torchrun_log, left)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if timed_out:
        output += f"\nb200 trial: stopped at the timeout, {args.timeout:g} s after the start"
    figures = run_figures(ranks, args.warmup, device)
    status = "timeout" if timed_out else "failed" if code != 0 else "ok" if figures["steps"] else "no_steps"
    return {"gpus": gpus, "status": status, **figures, "exit_status": code, "last_output": output}


def last_output(ranks_log: str, torchrun_log: str, left: list[int]) -> str:
    """The ranks' last lines, then torchrun's line for each rank that failed (a rank killed by a signal, a
    segfault or the OOM killer, prints nothing itself); torchrun's whole output when no rank started."""
    output = b200_procs.tail(ranks_log, TAIL_LINES)
    launcher = b200_procs.tail(torchrun_log, 400)
    failures = [line.strip() for line in launcher.splitlines() if RANK_FAILED.search(line)]
    lines = output.splitlines() + failures if output else launcher.splitlines()[-TAIL_LINES:]
    if left:
        lines.append(f"b200 trial: processes {left} of this run did not stop even on SIGKILL")
    return "\n".join(lines)


def read_ranks(folder: str) -> list[dict[str, Any]]:
    ranks = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("rank-") and name.endswith(".json"):
            try:
                with open(os.path.join(folder, name)) as handle:
                    ranks.append(json.load(handle))
            except (OSError, ValueError):
                continue
    return sorted(ranks, key=lambda figures: int(figures.get("rank", 0)))


def run_figures(ranks: list[dict[str, Any]], warmup: int, device: str) -> dict[str, Any]:
    steps = min((len(rank["times"]) for rank in ranks), default=0)
    timed = [step_durations(rank["times"][:steps]) for rank in ranks] if steps else []
    paces = [pace for pace in (steady_pace(durations[warmup:]) for durations in timed) if pace is not None]
    kinds = {rank.get("memory_kind") for rank in ranks}
    return {
        "steps": steps,
        "first_step_s": round(max(durations[0] for durations in timed), 4) if timed else None,
        "step_s_median": round(max(median for median, _ in paces), 4) if paces else None,
        "steps_per_s": round(min(rate for _, rate in paces), 3) if paces else None,
        "peak_memory_bytes": [rank.get("peak_memory_bytes") for rank in ranks],
        "memory_kind": kinds.pop() if len(kinds) == 1 else ("cuda_allocator" if device == "cuda" else "rss"),
        "card_memory_used_bytes": [rank.get("card_memory_used_bytes") for rank in ranks] if device == "cuda" else None,
    }


def step_durations(times: list[float]) -> list[float]:
    """Each step's time from the step end times; the first one's from the script's start."""
    return [later - earlier for earlier, later in zip([0.0, *times], times)]  # noqa: B905 - Python 3.8


def steady_pace(durations: list[float]) -> tuple[float, float] | None:
    """(median step, steps per second) of the steps after the warm-up; None when there are none."""
    if not durations or sum(durations) <= 0:
        return None
    return statistics.median(durations), len(durations) / sum(durations)


def scaling_efficiency(runs: list[dict[str, Any]]) -> float | None:
    if len(runs) != 2 or any(run["status"] != "ok" or not run["steps_per_s"] for run in runs):
        return None
    ratio: float = runs[1]["steps_per_s"] / runs[0]["steps_per_s"]
    return round(ratio, 3)


def verdicts(runs: list[dict[str, Any]], efficiency: float | None) -> list[dict[str, str]]:
    found = [{"code": run["status"], "text": run_problem(run)} for run in runs if run["status"] != "ok"]
    found += balance_verdict(runs[-1])
    if efficiency is not None and efficiency < EXCHANGES_DOMINATE:
        text = f"scaling efficiency {efficiency:.2f} (under {EXCHANGES_DOMINATE}): the exchanges between the cards"
        found.append({"code": "exchanges_dominate", "text": text + " dominate the step"})
    if efficiency is not None and efficiency < INDEPENDENT_RUNS:
        text = f"scaling efficiency {efficiency:.2f} (under {INDEPENDENT_RUNS}): two independent runs, one per card,"
        found.append({"code": "independent_runs", "text": text + " may serve better than one run on two cards"})
    if not found:
        shown = f"{efficiency:.2f}" if efficiency is not None else "unknown"
        found.append({"code": "ok", "text": f"scaling efficiency {shown}, memory balanced: the pair pays off"})
    return found


def run_problem(run: dict[str, Any]) -> str:
    cards = "1-card" if run["gpus"] == 1 else "2-card"
    if run["status"] == "timeout":
        return f"the {cards} run was stopped at the timeout after {run['steps']} steps: it hangs or is too slow"
    if run["status"] == "no_steps":
        return f"the {cards} run ended without an optimizer step (torch.optim.Optimizer.step is what is counted)"
    return f"the {cards} run failed (exit status {run['exit_status']}) after {run['steps']} steps: see last_output"


def balance_verdict(run: dict[str, Any]) -> list[dict[str, str]]:
    peaks = run["peak_memory_bytes"]
    if run["gpus"] < 2 or len(peaks) < 2 or not all(peaks):
        return []
    low, high = peaks.index(min(peaks)), peaks.index(max(peaks))
    if peaks[low] >= UNBALANCED_RATIO * peaks[high]:
        return []
    kind = run["memory_kind"]
    text = (
        f"unbalanced split: rank {low} peaked at {size(peaks[low])} against {size(peaks[high])} on rank {high}"
        f" ({kind}): one card holds most of the memory"
    )
    return [{"code": "unbalanced", "text": text}]


def size(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


def git_commit(folder: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.decode(errors="replace").strip()
    return commit if done.returncode == 0 and commit else None


def write_result(folder: str, result: dict[str, Any]) -> str:
    """<folder>/<UTC time>.json, never over an earlier trial's file."""
    os.makedirs(folder, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for attempt in range(1, 100):
        path = os.path.join(folder, stamp + (f"-{attempt}" if attempt > 1 else "") + ".json")
        try:
            with open(path, "x", encoding="utf-8") as handle:
                json.dump(result, handle, indent=2)
                handle.write("\n")
            return path
        except FileExistsError:
            continue
    raise TrialError(f"too many trials named {stamp} in {folder}")


def summary(result: dict[str, Any], path: str) -> str:
    lines = []
    for run in result["runs"]:
        peaks = ", ".join(size(peak) for peak in run["peak_memory_bytes"] if peak) or "none"
        figures = (
            f"first step {run['first_step_s']} s, median step {run['step_s_median']} s, "
            f"{run['steps_per_s']} steps/s, peak memory {peaks} ({run['memory_kind']})"
        )
        lines.append(f"  {run['gpus']} card(s): {run['status']}, {run['steps']} steps, {figures}")
    lines.append(f"  scaling efficiency: {result['scaling_efficiency']}")
    lines += [f"  {verdict['code']}: {verdict['text']}" for verdict in result["verdicts"]]
    return "\n".join(["b200 trial:", *lines, f"report: {path}"])

"""The GPU preflight as a node runs it: `python -m provisioning.preflight --device cpu --world-size 2`, its total
time and each check's share (the report's per-check `metrics.duration_s`), cold (fresh compile cache) then warm.
It must finish in under 60 s here. With --device cuda (on a GPU node) it also prints the steady step time and
the all-reduce bus bandwidth against their thresholds.

    .venv/bin/python bench/preflight_cpu.py [--device cpu] [--world-size 2] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import markdown_table, write_results  # noqa: E402

LIMIT_S = 60.0  # the preflight on CPU must finish within this, here


def run_once(device: str, world_size: int, cache: Path, work: Path, label: str) -> dict:
    report_path = work / f"{label}.json"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    began = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "provisioning.preflight",
            "--device",
            device,
            "--world-size",
            str(world_size),
            "--json",
            str(report_path),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    wall = time.perf_counter() - began
    if not report_path.exists():
        sys.exit(f"bench: the preflight wrote no report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    report = json.loads(report_path.read_text())
    checks = {
        check["name"]: {"status": check["status"], "duration_s": check["metrics"].get("duration_s")}
        for check in report["checks"]
    }
    by_name = {check["name"]: check for check in report["checks"]}
    step = by_name["step_time"]["metrics"]
    allreduce = by_name["allreduce"]["metrics"]
    return {
        "label": label,
        "exit_status": done.returncode,
        "ok": report["ok"],
        "wall_s": round(wall, 2),
        "report_duration_s": report["duration_s"],
        "checks": checks,
        "first_step_s": step.get("first_step_s"),
        "steady_step_s": step.get("steady_median_s"),
        "matmul_tflops": step.get("matmul_tflops"),
        "matmul_tflops_floor": step.get("matmul_tflops_floor"),
        "busbw_gbps": allreduce.get("busbw_gbps"),
        "busbw_floor_gbps": allreduce.get("busbw_floor_gbps"),
        "thresholds": report.get("thresholds", {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2, help="the first with an empty compile cache")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-preflight-"))
    cache = work / "inductor-cache"
    try:
        runs = [
            run_once(args.device, args.world_size, cache, work, "cold" if i == 0 else f"warm {i}")
            for i in range(args.runs)
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(runs, args)


def report(runs: list[dict], args) -> None:
    print(
        markdown_table(
            ["run", "ok", "wall (s)", "report (s)", f"under {LIMIT_S:.0f} s", "first step (s)", "steady step (s)"],
            [
                [
                    r["label"],
                    r["ok"],
                    f"{r['wall_s']:.1f}",
                    f"{r['report_duration_s']:.1f}",
                    "yes" if r["wall_s"] < LIMIT_S else "NO",
                    r["first_step_s"],
                    r["steady_step_s"],
                ]
                for r in runs
            ],
        )
    )
    last = runs[-1]
    timed = {name: c["duration_s"] for name, c in last["checks"].items() if c["duration_s"] is not None}
    in_checks = sum(timed.values())
    rows = [
        [name, last["checks"][name]["status"], f"{seconds:.2f}", f"{100 * seconds / last['wall_s']:.0f} %"]
        for name, seconds in sorted(timed.items(), key=lambda item: -item[1])
    ]
    rest = last["wall_s"] - in_checks
    rows.append(
        [
            "(start-up: interpreter, torch import, spawn, process group; host checks)",
            "",
            f"{rest:.2f}",
            f"{100 * rest / last['wall_s']:.0f} %",
        ]
    )
    print(f"\nShare of each check ({last['label']} run, {last['wall_s']:.1f} s)\n")
    print(markdown_table(["check", "status", "seconds", "share"], rows))
    if args.device == "cuda":
        print("\nOn the GPUs\n")
        print(
            markdown_table(
                ["figure", "measured", "threshold"],
                [
                    ["steady step time (s, slowest rank)", last["steady_step_s"], "-"],
                    ["bf16 matmul (TFLOPS)", last["matmul_tflops"], f">= {last['matmul_tflops_floor']}"],
                    ["all-reduce busbw (GB/s)", last["busbw_gbps"], f">= {last['busbw_floor_gbps']}"],
                ],
            )
        )
    path = write_results(
        f"preflight_{args.device}",
        {"device": args.device, "world_size": args.world_size, "limit_s": LIMIT_S, "runs": runs},
    )
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()

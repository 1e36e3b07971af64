"""The scan benchmark runs end to end at a small size, and what it measures holds: the same JSON-RPC calls
for 1 and for 50 open orders, and every payment confirmed within the policy plus one scan interval."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.servers import ROOT, clean_environment


def test_the_scan_benchmark_finds_flat_calls_and_detection_within_one_interval(tmp_path):
    # Given a small run of bench/scan_rpc_calls.py, its results written apart from the committed ones
    env = clean_environment(BENCH_RESULTS_DIR=str(tmp_path))
    command = [sys.executable, "bench/scan_rpc_calls.py", "--orders", "3", "50", "--paid", "3", "6"]
    command += ["--confirmations", "3", "--intervals", "2", "--phases", "2"]

    # When it runs
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    # Then it prints its tables and its results agree with the scan's promises
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| open orders |" in done.stdout
    results = json.loads((tmp_path / "scan.json").read_text())
    assert results["cpu_count"] and results["date"]
    few, many = results["by_open_orders"]
    assert (few["logs"], few["calls"], few["http"]) == (many["logs"], many["calls"], many["http"])
    assert results["detection_within_policy_plus_one_interval"] is True
    assert [run["blocks_to_confirmed"] for run in results["detection_latency"]] != []

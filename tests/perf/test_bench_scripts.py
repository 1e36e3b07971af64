"""The benchmarks run end to end at a small size, and what they measure holds. The scan's: the same JSON-RPC
calls for 1 and for 50 open orders, and every payment confirmed within the policy plus one scan interval. The
polling one's: both page scripts polled, the old one always for a full body, the new one answered 304 once
the order API serves ETags (it does since conditional polling landed)."""

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


def test_the_scan_budget_benchmark_prices_a_day_and_an_idle_network_costs_a_head_read_a_minute(tmp_path):
    # Given a small run of bench/scan_budget.py: one network, four passes a minute apart
    env = clean_environment(BENCH_RESULTS_DIR=str(tmp_path))
    command = [sys.executable, "bench/scan_budget.py", "--networks", "arbitrum", "--intervals", "60", "--passes", "4"]

    # When it runs
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    # Then it prints its tables, an idle network costs the head and the chain id once a minute (two calls a pass),
    # no scenario reads the chain's blocks in full, and more open orders cost more, never less
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| Infura plan |" in done.stdout and "| calls a pass | kB a pass |" in done.stdout
    rows = json.loads((tmp_path / "scan_budget.json").read_text())["per_network_day"]
    idle, *busy = rows
    assert idle["methods_per_day"] == {"eth_chainId": 1440, "eth_getBlockByNumber": 1440}
    assert idle["calls_per_pass"] == 2 and idle["bytes_per_pass"] > 0
    assert all(row["full_blocks_per_day"] == 0 for row in rows)
    assert [row["calls_per_day"] for row in busy] == sorted(row["calls_per_day"] for row in busy)


def test_the_poll_benchmark_measures_both_scripts_and_the_new_one_gets_304s(tmp_path):
    # Given a small run of bench/poll.py: 20 customers for 6 s each, its results written apart
    env = clean_environment(BENCH_RESULTS_DIR=str(tmp_path))
    command = [sys.executable, "bench/poll.py", "--customers", "20", "--duration", "6"]

    # When it runs
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    # Then it prints its table, and both modes polled every customer's order and were served
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| mode |" in done.stdout
    results = json.loads((tmp_path / "poll.json").read_text())
    assert results["cpu_count"] and results["date"]
    before, after = results["modes"]["before"], results["modes"]["after"]
    for mode in (before, after):
        assert mode["customers"] == 20 and mode["unfinished_customers"] == 0
        assert mode["requests"] >= 20 and mode["errors"] == 0
        assert set(mode["statuses"]) <= {"200", "304"}, mode["statuses"]
        assert mode["server_cpu_s"] > 0 and mode["workers_seen"] == 2 and mode["backends_seen"] >= 1
        assert mode["trickle_passes"] >= 6
    # the old script never asks conditionally; the new one does, and is answered 304 while nothing changed
    assert before["if_none_match_sent"] == 0 and "304" not in before["statuses"]
    assert results["etag_served"] is True
    assert after["if_none_match_sent"] > 0 and after["statuses"].get("304", 0) > 0


def test_the_history_benchmark_measures_every_path_at_two_sizes_and_the_passes_stay_flat(tmp_path):
    # Given a small run of bench/history.py: 200 and 2,000 orders, one timed run each
    env = clean_environment(BENCH_RESULTS_DIR=str(tmp_path))
    command = [sys.executable, "bench/history.py", "--orders", "200", "2000", "--runs", "1"]

    # When it runs
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)

    # Then it prints its table and every path answered at both sizes with the same number of statements
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| path | 200 orders | 2,000 orders |" in done.stdout
    results = json.loads((tmp_path / "history.json").read_text())["results"]
    by_path: dict[str, dict[int, int]] = {}
    for result in results:
        by_path.setdefault(result["path"], {})[result["orders"]] = result["queries"]
    assert len(by_path) == 18
    assert {path: counts[200] for path, counts in by_path.items()} == {
        path: counts[2000] for path, counts in by_path.items()
    }

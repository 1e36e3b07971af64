"""Usage errors exit 2 and write no report; they need no torch (they stop before importing it)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.provisioning.preflight.helpers import PREFLIGHT
from tests.servers import ROOT

USAGE_ERRORS = {
    "world size 0": ["--device", "cpu", "--world-size", "0"],
    "device tpu": ["--device", "tpu", "--world-size", "2"],
    "world size not a number": ["--device", "cpu", "--world-size", "two"],
    "missing device": ["--world-size", "2"],
    "malformed expect-arch": ["--device", "cpu", "--world-size", "2", "--expect-arch", "blackwell"],
    "inject on a rank that does not exist": ["--device", "cpu", "--world-size", "2", "--inject", "wrong-allreduce:2"],
    "unknown fault": ["--device", "cpu", "--world-size", "2", "--inject", "melt-card"],
    "unreadable profile": ["--device", "cpu", "--world-size", "2", "--profile", "/nonexistent/profile.json"],
}


def run(tmp_path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, bool]:
    report = tmp_path / "report.json"
    completed = subprocess.run(
        [*PREFLIGHT, "--json", str(report), *args], cwd=ROOT, capture_output=True, text=True, env=env
    )
    return completed, report.exists()


@pytest.mark.parametrize("args", USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_a_usage_error_exits_two_without_a_report(tmp_path, args):
    completed, wrote_report = run(tmp_path, *args)

    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert "error" in completed.stderr
    assert not wrote_report


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('["a list"]', "must be a JSON object"),
        ('{"chekcs": []}', "unknown profile keys: chekcs"),
        ('{"checks": ["allreduce", "warp_drive"]}', "unknown checks in the profile: warp_drive"),
        ('{"extensions": [{"name": "x", "module": "x"}]}', "must be an object with name, module, op"),
        ('{"thresholds": {"busbw_floor_gbps": "fast"}}', "threshold `busbw_floor_gbps` must be like"),
        ('{"allreduce": {"bytes": -1}}', "`allreduce.bytes` must be a non-negative integer"),
    ],
)
def test_an_invalid_profile_is_a_usage_error_that_says_what_is_wrong(tmp_path, content, message):
    profile = tmp_path / "profile.json"
    profile.write_text(content)

    completed, wrote_report = run(tmp_path, "--device", "cpu", "--world-size", "2", "--profile", str(profile))

    assert completed.returncode == 2
    assert message in completed.stderr
    assert not wrote_report


@pytest.mark.usefixtures("require_torch")
def test_cuda_without_cards_fails_the_preflight_and_never_silently_runs_on_cpu(tmp_path):
    import torch

    # On a machine with cards, they are hidden from the preflight: it must see none.
    no_cards = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    completed, wrote_report = run(tmp_path, "--device", "cuda", "--world-size", "2", env=no_cards)

    report = json.loads((tmp_path / "report.json").read_text())
    checks = {check["name"]: check for check in report["checks"]}
    assert completed.returncode == 1
    if torch.version.cuda:  # a CUDA build that sees no card: `arch` fails with the count, no rank runs
        assert checks["arch"]["status"] == "fail"
        assert checks["arch"]["detail"].startswith("arch failed: 0 of 2 cards visible")
        assert "CUDA_VISIBLE_DEVICES=''" in checks["arch"]["detail"]
        assert checks["load"]["detail"] == "not run: 0 of 2 cards visible"
    else:  # a CPU-only build on --device cuda: `stack` fails with what to install, the report says so
        stack = report["checks"][0]
        assert stack["name"] == "stack" and stack["status"] == "fail"
        assert "CPU-only build" in stack["detail"] and "install a CUDA 12.8+ build of PyTorch 2.7" in stack["detail"]
        assert {check["status"] for check in report["checks"][1:]} == {"skip"}

"""A node without PyTorch gets a report that says so: `stack` fails with what to install, exit 1."""

from __future__ import annotations

import json
import os
import subprocess

from tests.provisioning.preflight.helpers import PREFLIGHT
from tests.servers import ROOT


def test_a_node_without_torch_fails_stack_and_still_writes_the_report(tmp_path):
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("No module named torch")\n')
    report_path = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(shadow.parent)}

    completed = subprocess.run(
        [*PREFLIGHT, "--device", "cuda", "--world-size", "2", "--json", str(report_path), "--order", "ORD-7"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )

    report = json.loads(report_path.read_text())
    stack, *others = report["checks"]
    assert completed.returncode == 1
    assert report["ok"] is False and report["order_reference"] == "ORD-7"
    assert stack["status"] == "fail" and "torch is not importable" in stack["detail"]
    assert "install a CUDA 12.8+ build of PyTorch 2.7 or newer" in stack["detail"]
    assert {check["status"] for check in others} == {"skip"}

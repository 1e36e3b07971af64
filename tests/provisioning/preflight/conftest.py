"""Run the GPU preflight for real, as a node runs it: a subprocess, two gloo ranks on CPU.

No database: these tests never ask for the `db` fixture. Torch is required: with CI=true a missing torch
fails the test, elsewhere it skips (tests.servers.server_missing).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.provisioning.preflight.helpers import PREFLIGHT
from tests.servers import ROOT, server_missing


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None

    def check(self, name: str) -> dict[str, Any]:
        assert self.report is not None, f"no report was written:\n{self.stdout}\n{self.stderr}"
        matches = [check for check in self.report["checks"] if check["name"] == name]
        assert len(matches) == 1, f"check {name} appears {len(matches)} times"
        return matches[0]

    def statuses(self) -> dict[str, str]:
        return {check["name"]: check["status"] for check in self.report["checks"]}


@pytest.fixture(scope="session")
def require_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        server_missing("torch (pip install torch==2.13.0 numpy)")


@pytest.fixture(scope="session")
def preflight(pytestconfig, tmp_path_factory):
    """Run the preflight: `preflight(tmp_path, "--device", "cpu", ...)` -> Run; `env` adds to the environment.

    Inductor's cache lives in pytest's cache folder (when the cache plugin is on), so compiled steps are
    warm after the first run; TORCHINDUCTOR_CACHE_DIR, when set, wins.
    """
    store = getattr(pytestconfig, "cache", None)
    cache = store.mkdir("torchinductor") if store is not None else tmp_path_factory.mktemp("torchinductor")

    def run(
        folder: Path, *args: str, profile: dict | None = None, timeout: float = 240, env: dict[str, str] | None = None
    ) -> Run:
        folder.mkdir(parents=True, exist_ok=True)
        report_path = folder / "report.json"
        command = [*PREFLIGHT, "--json", str(report_path), *args]
        if profile is not None:
            profile_path = folder / "profile.json"
            profile_path.write_text(json.dumps(profile))
            command += ["--profile", str(profile_path)]
        cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR", str(cache))
        environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir, **(env or {})}
        completed = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout)
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        return Run(completed.returncode, completed.stdout, completed.stderr, report)

    return run

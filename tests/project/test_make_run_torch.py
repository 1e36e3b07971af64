"""`make run` puts PyTorch's CPU build (and numpy) in the venv before serving, so that the development nodes'
preflight can pass; it never reinstalls a torch that already imports, and never takes the CUDA build."""

from __future__ import annotations

import os
import subprocess
import sys

from scripts.cpu_torch import is_cpu_build
from tests.servers import ROOT

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def dry_run_of_make_run(venv) -> list[str]:
    """What `make run` would run on a fresh clone (a venv that does not exist yet), without running it."""
    shown = subprocess.run(
        ["make", "-n", "run", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return shown.stdout.splitlines()


def test_make_run_installs_the_cpu_build_of_torch_and_numpy_before_it_serves(tmp_path):
    lines = dry_run_of_make_run(tmp_path / "venv")

    torch_steps = [i for i, line in enumerate(lines) if "scripts/cpu_torch.py" in line]
    serve = next(i for i, line in enumerate(lines) if "scripts/devstack.py" in line)
    assert len(torch_steps) == 1, lines
    step = lines[torch_steps[0]]
    assert torch_steps[0] < serve
    assert step.startswith(f"{tmp_path / 'venv'}/bin/python ")  # the venv's own pip installs into it
    assert f"--cpu-index-url {CPU_INDEX}" in step
    assert step.endswith(" torch==2.13.0 numpy")


def test_the_torch_step_installs_nothing_when_torch_and_numpy_already_import():
    # Given this venv, where the suite's torch imports; and no package index reachable (any install would fail)
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}
    done = subprocess.run(
        [sys.executable, "scripts/cpu_torch.py", "--cpu-index-url", "http://127.0.0.1:9/", "torch==2.13.0", "numpy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    # Then it says what it found and exits 0, without asking pip for anything
    assert done.returncode == 0, done.stdout + done.stderr
    assert "already importable" in done.stdout
    assert "pip" not in done.stdout + done.stderr


def report(*items: tuple[str, str]) -> dict:
    """The part of `pip install --dry-run --report` that says what would be installed."""
    return {"install": [{"metadata": {"name": name, "version": version}} for name, version in items]}


def test_a_resolution_that_pulls_cuda_packages_is_not_a_cpu_build():
    cuda = report(("torch", "2.13.0"), ("nvidia-cublas-cu12", "12.8.4.1"), ("triton", "3.5.0"), ("numpy", "2.3.0"))
    tagged = report(("torch", "2.13.0+cu128"), ("numpy", "2.3.0"))

    assert not is_cpu_build(cuda)
    assert not is_cpu_build(tagged)


def test_a_resolution_without_cuda_packages_is_a_cpu_build():
    local_cpu_wheel = report(("torch", "2.13.0+cpu"), ("numpy", "2.3.0"), ("sympy", "1.14.0"))
    macos = report(("torch", "2.13.0"), ("filelock", "3.18.0"))

    assert is_cpu_build(local_cpu_wheel)
    assert is_cpu_build(macos)
    assert not is_cpu_build(report(("numpy", "2.3.0")))  # no torch resolved at all

"""With `compile: true`, step_time times the compiling first step apart from the steady steps.

Inductor's cache is kept in pytest's cache folder: the first run ever costs 20-35 s, later ones seconds.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("require_torch")


def test_a_compiled_first_step_is_timed_apart_from_the_steady_median(preflight, tmp_path):
    profile = {"compile": True, "checks": ["load", "forward", "backward", "step_time"], "steps": {"measure": 3}}
    run = preflight(tmp_path, "--device", "cpu", "--world-size", "2", profile=profile)

    step_time = run.check("step_time")
    assert run.returncode == 0, run.stdout + run.stderr
    assert step_time["status"] == "pass"
    assert step_time["metrics"]["compiled"] is True
    assert "(compilation)" in step_time["detail"]
    assert step_time["metrics"]["first_step_s"] > step_time["metrics"]["steady_median_s"]
    for rank in step_time["metrics"]["ranks"]:
        assert rank["inductor_cache_dir"]


def test_a_node_without_a_working_compiler_fails_step_time_saying_what_to_install(preflight, tmp_path, monkeypatch):
    """torch.compile needs the host's compiler on first use (Triton's launcher on a GPU, Inductor's C++ on a
    CPU): a node with "only Python and PyTorch" fails there, and the fix must name what to install."""
    monkeypatch.setenv("CXX", str(tmp_path / "no-compiler" / "g++"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "empty-cache"))  # a warm cache would not compile
    profile = {"compile": True, "checks": ["load", "forward", "backward", "step_time"], "steps": {"warmup": 0}}
    run = preflight(tmp_path, "--device", "cpu", "--world-size", "2", profile=profile)

    step_time = run.check("step_time")
    assert run.returncode == 1, run.stdout + run.stderr
    assert step_time["status"] == "fail"
    assert "the first step failed (InductorError: InvalidCxxCompiler" in step_time["detail"]
    assert "gcc and the Python development headers (python3-dev" in step_time["detail"]
    assert "the preparation's setup step installs them" in step_time["detail"]

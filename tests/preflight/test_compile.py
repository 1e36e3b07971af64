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

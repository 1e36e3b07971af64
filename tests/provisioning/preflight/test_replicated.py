"""With `shard: false` the model is replicated (DDP) on both ranks and still restores bitwise."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("require_torch")


def test_a_replicated_model_holds_every_parameter_on_each_rank_and_restores_bitwise(preflight, tmp_path):
    checks = ["load", "forward", "backward", "checkpoint_write", "checkpoint_restore"]
    run = preflight(tmp_path, "--device", "cpu", "--world-size", "2", profile={"shard": False, "checks": checks})

    load = run.check("load")["metrics"]["ranks"]
    assert run.returncode == 0, run.stdout + run.stderr
    assert [rank["sharded"] for rank in load] == [False, False]
    assert all(rank["parameters_local"] == rank["parameters_total"] for rank in load)
    assert run.check("checkpoint_restore")["metrics"]["mismatches"] == 0
    assert run.report["split"]["mesh"] is None
    assert run.report["split"]["strategy"].startswith("replicated")
    assert "c10d::allreduce_" in run.report["split"]["collectives"]["train_step"]  # DDP's gradient all-reduce

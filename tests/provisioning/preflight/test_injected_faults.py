"""Each injected fault fails its own check, exits 1, and the detail names the check and the rank.

The faults go through real mechanisms: an extension module in this folder that raises on its first op, a
checkpoint shard altered on disk between the write and the restore, one rank contributing a wrong value to
the all-reduce, a rank whose op never returns. The runs are trimmed to the checks each fault concerns.
"""

from __future__ import annotations

import pytest

from tests.provisioning.preflight.helpers import GOOD_EXTENSION, extension

pytestmark = pytest.mark.usefixtures("require_torch")

TWO_CPU_RANKS = ("--device", "cpu", "--world-size", "2")


def test_an_extension_that_raises_on_its_first_op_fails_extensions_on_every_rank(preflight, tmp_path):
    broken = extension("flash-attn-cu126", "broken_extension", "mod.fused_gelu(x)", "F.gelu(x, approximate='tanh')")
    run = preflight(
        tmp_path, *TWO_CPU_RANKS, profile={"checks": ["arch", "extensions"], "extensions": [GOOD_EXTENSION, broken]}
    )

    extensions = run.check("extensions")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.report["ok"] is False
    assert extensions["status"] == "fail"
    assert extensions["detail"].startswith("extensions failed on rank 0, rank 1: flash-attn-cu126:")
    assert "no kernel image is available" in extensions["detail"]
    wanted = "install a build of tests.provisioning.preflight.broken_extension compiled for this card"
    assert wanted in extensions["detail"]
    assert "fused-gelu" not in extensions["detail"]  # the working probe is not blamed
    for rank in extensions["metrics"]["ranks"]:
        good, bad = rank["probes"]
        assert good["ok"] is True and "ok" not in bad


def test_an_extension_that_cannot_be_imported_fails_extensions(preflight, tmp_path):
    absent = {"name": "xformers", "module": "no_such_extension_module", "op": "mod.memory_efficient_attention(q, k, v)"}
    run = preflight(tmp_path, *TWO_CPU_RANKS, profile={"checks": ["extensions"], "extensions": [absent]})

    assert run.returncode == 1
    assert run.check("extensions")["status"] == "fail"
    assert "importing no_such_extension_module failed (ModuleNotFoundError" in run.check("extensions")["detail"]


def test_a_corrupted_checkpoint_shard_fails_checkpoint_restore_naming_the_rank(preflight, tmp_path):
    checks = ["load", "forward", "backward", "checkpoint_write", "checkpoint_restore"]
    run = preflight(tmp_path, *TWO_CPU_RANKS, "--inject", "corrupt-checkpoint:1", profile={"checks": checks})

    restore = run.check("checkpoint_restore")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.check("checkpoint_write")["status"] == "pass"
    assert restore["status"] == "fail"
    assert restore["detail"].startswith("checkpoint_restore failed on rank 1:")
    assert "rank 0" not in restore["detail"]
    rank1 = restore["metrics"]["ranks"][1]
    assert rank1["injected_corruption"] == "__1_0.distcp"
    if "mismatches" in rank1:  # the flipped bytes landed in tensor data: name the file they were read from
        assert rank1["mismatches"] > 0 and rank1["mismatched_files"] == ["__1_0.distcp"]
        assert restore["metrics"]["ranks"][0]["mismatches"] == 0
    else:  # they broke the file's structure: the load itself failed on rank 1
        assert rank1["failed_ranks"] == [1]
    assert run.report["injected_faults"] == ["corrupt-checkpoint:1"]


def test_a_wrong_allreduce_contribution_fails_allreduce_naming_the_rank(preflight, tmp_path):
    run = preflight(tmp_path, *TWO_CPU_RANKS, "--inject", "wrong-allreduce", profile={"checks": ["allreduce"]})

    allreduce = run.check("allreduce")
    assert run.returncode == 1, run.stdout + run.stderr
    assert allreduce["status"] == "fail"
    assert allreduce["detail"].startswith("allreduce failed on rank 1: rank 1 sent")
    assert "take the card on rank 1 out of service" in allreduce["detail"]
    assert allreduce["metrics"]["correct_on_every_rank"] is False
    assert [rank["wrong_contributed"] > 0 for rank in allreduce["metrics"]["ranks"]] == [False, True]
    assert run.report["injected_faults"] == ["wrong-allreduce:1"]


def test_a_rank_that_hangs_is_killed_at_the_hard_timeout_and_named(preflight, tmp_path):
    stall = extension("hung-kernel", "stalling_extension", "mod.stall(x)")
    checks = ["extensions", "load", "allreduce"]
    # 30 s: the ranks must reach the stalled check first, and under load in CI their start-up took over 8 s.
    run = preflight(tmp_path, *TWO_CPU_RANKS, "--timeout", "30", profile={"checks": checks, "extensions": [stall]})

    extensions = run.check("extensions")
    assert run.returncode == 1, run.stdout + run.stderr
    assert extensions["status"] == "fail"
    assert extensions["detail"].startswith("extensions failed on rank 1: rank 1 did not finish within the hard timeout")
    assert run.check("load")["detail"] == "not reached: extensions failed on rank 1"
    assert run.check("forward")["detail"] == "not in the profile's checks"
    assert run.report["duration_s"] < 30 + 60  # killed at the deadline, with start-up and the kill on a busy machine

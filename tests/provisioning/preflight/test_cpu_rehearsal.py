"""A healthy CPU rehearsal with two gloo ranks passes every check and documents the split.

One real run is shared by every test in this module (module-scoped fixture).
"""

from __future__ import annotations

import pytest

from provisioning.preflight.report import ALL_CHECKS, CONTRACT_CHECKS
from tests.provisioning.preflight.helpers import GOOD_EXTENSION

pytestmark = pytest.mark.usefixtures("require_torch")


@pytest.fixture(scope="module")
def rehearsal(require_torch, preflight, tmp_path_factory):
    folder = tmp_path_factory.mktemp("rehearsal")
    return preflight(
        folder,
        "--device",
        "cpu",
        "--world-size",
        "2",
        "--order",
        "ORD-REHEARSAL-1",
        profile={"name": "two-card rehearsal", "extensions": [GOOD_EXTENSION]},
    )


def test_a_healthy_rehearsal_exits_zero_with_ok_true(rehearsal):
    assert rehearsal.returncode == 0, rehearsal.stdout + rehearsal.stderr
    assert rehearsal.report["ok"] is True
    assert not [name for name, status in rehearsal.statuses().items() if status == "fail"]


def test_every_check_is_reported_once_in_the_contract_order(rehearsal):
    names = [check["name"] for check in rehearsal.report["checks"]]
    assert names == list(ALL_CHECKS)
    assert names[: len(CONTRACT_CHECKS)] == list(CONTRACT_CHECKS)
    for check in rehearsal.report["checks"]:
        assert set(check) == {"name", "status", "detail", "metrics"}
        assert check["status"] in {"pass", "fail", "warn", "skip"}
        assert isinstance(check["metrics"], dict)
        assert check["detail"], f"{check['name']} gives no detail"


def test_the_checks_that_can_run_on_cpu_pass(rehearsal):
    statuses = rehearsal.statuses()
    runnable = ["stack", "extensions", "load", "forward", "backward", "checkpoint_write", "checkpoint_restore"]
    runnable += ["allreduce", "memory_balance", "step_time"]
    assert {name: statuses[name] for name in runnable} == dict.fromkeys(runnable, "pass")


def test_the_report_keeps_the_order_versions_thresholds_and_times(rehearsal):
    import torch

    report = rehearsal.report
    assert report["order_reference"] == "ORD-REHEARSAL-1"
    assert report["device"] == "cpu" and report["world_size"] == 2
    versions = report["versions"]
    for key in ("python", "torch", "cuda", "cudnn", "nccl", "driver", "gpu_names", "compute_capabilities"):
        assert key in versions
    assert versions["torch"] == torch.__version__
    assert versions["arch_list"] == list(torch.cuda.get_arch_list())
    assert versions["gloo"] is True
    assert report["thresholds"]["busbw_floor_gbps"] == pytest.approx(0.9 * 670)
    assert report["thresholds"]["balance_min_ratio"] == 0.5
    assert report["started_at"] <= report["finished_at"]
    assert 0 < report["duration_s"] < 120
    assert report["profile"]["name"] == "two-card rehearsal"
    assert len(report["profile"]["sha256"]) == 64
    assert "injected_faults" not in report


def test_stack_passes_on_cpu_and_says_the_cuda_rule_does_not_apply(rehearsal):
    stack = rehearsal.check("stack")
    assert stack["status"] == "pass"
    assert "gloo" in stack["detail"] and "--device cuda" in stack["detail"]
    assert stack["metrics"]["cuda_rule"] == "not applicable on cpu"


def test_arch_and_the_hardware_gates_skip_on_cpu_with_the_reason(rehearsal):
    assert rehearsal.check("arch")["status"] == "skip"
    assert "no CUDA architecture" in rehearsal.check("arch")["detail"]
    for gate in ("idle_cards", "gpu_health", "nvlink", "dcgm_diag"):
        assert rehearsal.check(gate)["status"] == "skip"
        assert "--device cuda" in rehearsal.check(gate)["detail"]


def test_the_extension_probe_ran_on_both_ranks_and_matched_the_reference(rehearsal):
    extensions = rehearsal.check("extensions")
    assert extensions["status"] == "pass"
    for rank in extensions["metrics"]["ranks"]:
        (probe,) = rank["probes"]
        assert probe["ok"] is True and probe["max_abs_difference"] < 1e-5


def test_the_model_is_sharded_over_both_ranks(rehearsal):
    load = rehearsal.check("load")
    assert load["status"] == "pass"
    ranks = load["metrics"]["ranks"]
    total = ranks[0]["parameters_total"]
    assert [rank["sharded"] for rank in ranks] == [True, True]
    assert sum(rank["parameters_local"] for rank in ranks) == total
    assert all(rank["parameters_local"] < total for rank in ranks)


def test_forward_and_backward_give_a_finite_loss_and_weights_that_change(rehearsal):
    for rank in rehearsal.check("forward")["metrics"]["ranks"]:
        assert 0 < rank["loss"] < 100
    for rank in rehearsal.check("backward")["metrics"]["ranks"]:
        assert rank["nonfinite_grads"] == 0 and rank["without_grad"] == 0
        assert rank["nonzero_grads"] == rank["parameters"]
        assert rank["changed_by_step"] == rank["nonempty_local"] > 0


def test_the_checkpoint_restores_bitwise_with_zero_mismatches(rehearsal):
    restore = rehearsal.check("checkpoint_restore")
    assert restore["status"] == "pass"
    assert restore["metrics"]["mismatches"] == 0
    for rank in restore["metrics"]["ranks"]:
        assert rank["mismatches"] == 0
        assert rank["tensors"] > 100  # every model and optimizer tensor, not a sample
        assert rank["perturbed"] == rank["tensors"]  # the restore had something to prove


def test_each_rank_wrote_its_own_checkpoint_shard(rehearsal):
    ranks = rehearsal.check("checkpoint_write")["metrics"]["ranks"]
    assert [entry["file"] for entry in ranks[0]["files"]] == ["__0_0.distcp", ".metadata"]
    assert [entry["file"] for entry in ranks[1]["files"]] == ["__1_0.distcp"]
    assert all(rank["bytes_written"] > 0 for rank in ranks)


def test_the_allreduce_is_correct_on_every_rank_and_records_bus_bandwidth(rehearsal):
    allreduce = rehearsal.check("allreduce")
    metrics = allreduce["metrics"]
    assert allreduce["status"] == "pass"
    assert metrics["correct_on_every_rank"] is True
    assert [rank["wrong_result"] for rank in metrics["ranks"]] == [0, 0]
    assert [rank["first_value"] for rank in metrics["ranks"]] == [3.0, 3.0]
    assert metrics["bytes"] == 16 * 2**20
    assert metrics["busbw_gbps"] > 0
    assert metrics["busbw_gbps"] == pytest.approx(metrics["algbw_gbps"])  # 2(n-1)/n = 1 for two ranks
    assert metrics["busbw_floor_gbps"] is None  # no floor for gloo on CPU


def test_memory_balance_gathers_one_peak_per_rank(rehearsal):
    memory = rehearsal.check("memory_balance")
    assert memory["status"] == "pass"
    peaks = [rank["peak_bytes"] for rank in memory["metrics"]["ranks"]]
    assert len(peaks) == 2 and all(peak > 0 for peak in peaks)
    assert memory["metrics"]["min_max_ratio"] >= 0.5


def test_step_time_reports_the_first_step_apart_from_the_steady_median(rehearsal):
    step_time = rehearsal.check("step_time")
    metrics = step_time["metrics"]
    assert step_time["status"] == "pass"
    assert metrics["first_step_s"] > 0 and metrics["steady_median_s"] > 0
    assert metrics["compiled"] is False  # the default on cpu keeps the suite fast
    assert metrics["precision"] == "fp32"
    for rank in metrics["ranks"]:
        assert len(rank["steady_steps_s"]) == 3
        assert rank["batch_per_rank"] == 8 and rank["seq"] == 64


def test_the_split_documents_mesh_parameters_collectives_and_files_per_card(rehearsal):
    split = rehearsal.report["split"]
    assert split["documented"] is True
    assert split["mesh"] == {"device_type": "cpu", "shape": [2], "dim_names": ["fsdp"]}
    per_card = split["parameters_per_card"]
    assert [card["rank"] for card in per_card] == [0, 1]
    assert sum(card["parameters"] for card in per_card) == split["parameters_total"]
    step = split["collectives"]["train_step"]
    assert step["c10d::_allgather_base_"]["count"] > 0  # FSDP2 gathers the shards for compute
    assert step["c10d::_reduce_scatter_base_"]["bytes"] > 0  # and scatters the gradients back
    assert split["collectives"]["allreduce"]["busbw_gbps"] > 0
    assert split["collectives"]["checkpoint_write"]
    files = {card["rank"]: [entry["file"] for entry in card["files"]] for card in split["checkpoint_files_per_card"]}
    assert files == {0: ["__0_0.distcp", ".metadata"], 1: ["__1_0.distcp"]}


def test_the_printed_summary_gives_the_verdict_and_every_check(rehearsal):
    first, *lines = rehearsal.stdout.strip().splitlines()
    assert first.startswith("preflight PASSED for order ORD-REHEARSAL-1: cpu x2")
    assert [line.split()[1] for line in lines] == list(ALL_CHECKS)

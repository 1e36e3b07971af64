"""The rules on each rank's facts: arch, memory balance, bus bandwidth, the hard-timeout bookkeeping."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("require_torch")

GIB = 2**30
B200 = 192 * GIB


@pytest.fixture
def arch():
    from provisioning.preflight.checks import arch

    return arch


def test_a_b200_with_a_cu128_build_passes_the_arch_rule(arch):
    status, detail = arch.evaluate(
        capability=(10, 0),
        card="NVIDIA B200",
        arch_list=["sm_90", "sm_100", "sm_120"],
        expect="sm_100",
        torch_version="2.7.1+cu128",
    )
    assert status == "pass" and detail == "NVIDIA B200 is sm_100, native in the build"


def test_a_build_without_sm_100_kernels_fails_with_what_to_install(arch):
    status, detail = arch.evaluate(
        capability=(10, 0),
        card="NVIDIA B200",
        arch_list=["sm_80", "sm_86", "sm_90"],
        expect=None,
        torch_version="2.6.0+cu126",
    )
    assert status == "fail"
    assert detail.startswith("torch 2.6.0+cu126 has no kernels for sm_100")
    assert detail.endswith("install a CUDA 12.8+ build of PyTorch 2.7 or newer (the cu128 wheels or later)")


def test_ptx_only_is_not_native(arch):
    status, detail = arch.evaluate(
        capability=(10, 0), card="NVIDIA B200", arch_list=["sm_90", "compute_100"], expect=None, torch_version="x"
    )
    assert status == "fail" and "only PTX" in detail
    assert arch.is_native("sm_100", ["sm_100a"]) and not arch.is_native("sm_100", ["sm_1000"])


def test_expect_arch_fails_another_card_and_a_device_without_architecture(arch):
    hopper = arch.evaluate(
        capability=(9, 0),
        card="NVIDIA H100",
        arch_list=["sm_90", "sm_100"],
        expect="sm_100",
        torch_version="2.7.1+cu128",
    )
    assert hopper == (
        "fail",
        "NVIDIA H100 is sm_90, not the expected sm_100: this node does not carry the ordered cards",
    )
    assert arch.evaluate(capability=None, card="cpu", arch_list=[], expect="sm_100", torch_version="x")[0] == "fail"
    assert arch.evaluate(capability=None, card="cpu", arch_list=[], expect=None, torch_version="x")[0] == "skip"


def test_memory_all_on_one_card_fails_and_an_uneven_split_warns():
    from provisioning.preflight.checks.memory import evaluate
    from provisioning.preflight.profile import DEFAULT_THRESHOLDS

    lopsided = evaluate([180 * GIB, 2 * GIB], [B200, B200], DEFAULT_THRESHOLDS)
    assert lopsided[0] == "fail"
    assert lopsided[1].startswith("memory_balance failed on rank 0: it peaks at 94% of its memory while rank 1")
    uneven = evaluate([40 * GIB, 15 * GIB], [B200, B200], DEFAULT_THRESHOLDS)
    assert uneven[0] == "warn" and "rank 1" in uneven[1]
    assert evaluate([40 * GIB, 38 * GIB], [B200, B200], DEFAULT_THRESHOLDS)[0] == "pass"


def test_bus_bandwidth_follows_nccl_tests():
    from provisioning.preflight.checks.allreduce import bus_bandwidth

    assert bus_bandwidth(670.0, 2) == pytest.approx(670.0)
    assert bus_bandwidth(100.0, 8) == pytest.approx(175.0)
    assert bus_bandwidth(100.0, 1) == 0


def test_a_crashed_rank_fails_the_check_it_was_in_and_later_checks_are_not_reached(tmp_path):
    from provisioning.preflight import launcher, worker

    (tmp_path / "rank-0.stage").write_text("step_time:gather")
    (tmp_path / "rank-1.stage").write_text("step_time")
    (tmp_path / "rank-1.error").write_text("Traceback ...\nRuntimeError: NCCL error: unhandled system error\n")
    results = {name: None for name in worker.RANK_CHECKS[:7]}
    launcher.fill_unfinished(results, tmp_path, 2, ("crash", 1, "exited with signal SIGSEGV"), worker.RANK_CHECKS)

    failed = results["step_time"]
    assert failed.status == "fail"
    assert failed.detail.startswith("step_time failed on rank 1: rank 1 exited with signal SIGSEGV")
    assert "RuntimeError: NCCL error" in failed.detail
    assert [results[name].status for name in worker.RANK_CHECKS[8:]] == ["skip"] * 2


def test_expect_arch_with_an_arch_specific_suffix_names_the_same_card(arch):
    for expect in ("sm_100a", "sm_100f", "sm_100"):
        status, _ = arch.evaluate(
            capability=(10, 0), card="NVIDIA B200", arch_list=["sm_100"], expect=expect, torch_version="2.7.1+cu128"
        )
        assert status == "pass", expect
    hopper = arch.evaluate(
        capability=(9, 0), card="NVIDIA H200", arch_list=["sm_90"], expect="sm_100a", torch_version="x"
    )
    assert hopper[0] == "fail" and "not the expected sm_100a" in hopper[1]


def test_memory_balance_sees_a_card_holding_another_ranks_tensors():
    """Each process's allocator peak looks even, but rank 1 allocated on card 0: only the card's own used memory
    (mem_get_info) shows card 0 full and card 1 empty."""
    from types import SimpleNamespace

    from provisioning.preflight.checks import memory
    from provisioning.preflight.profile import DEFAULT_THRESHOLDS
    from provisioning.preflight.report import Result

    def rank(peak: int, used: int) -> Result:
        return Result(
            "memory_balance",
            "pass",
            "",
            {"measure": "m", "peak_bytes": peak, "device_used_bytes": used, "capacity_bytes": B200},
        )

    ctx = SimpleNamespace(settings=SimpleNamespace(thresholds=DEFAULT_THRESHOLDS))
    merged = memory.merge(ctx, [rank(85 * GIB, 176 * GIB), rank(85 * GIB, int(0.6 * GIB))])
    assert merged.status == "fail"
    assert merged.detail.startswith("memory_balance failed on rank 0: its card's used memory (mem_get_info) is at 92%")
    assert "rank 1's card is at 0.3%" in merged.detail
    balanced = memory.merge(ctx, [rank(85 * GIB, 88 * GIB), rank(84 * GIB, 87 * GIB)])
    assert balanced.status == "pass"
    # Each measure's verdict names its measure (the H200 run read "balanced: ...; balanced: ..." twice).
    assert "balanced (peak allocated by torch)" in balanced.detail
    assert "balanced (card's used memory)" in balanced.detail


def test_the_rehearsal_batch_is_sized_so_a_broken_split_would_cross_the_fail_line():
    from provisioning.preflight import model
    from provisioning.preflight.profile import DEFAULT_THRESHOLDS, DEVICE_DEFAULTS

    config, target = DEVICE_DEFAULTS["cuda"]["model"], DEVICE_DEFAULTS["cuda"]["memory_target"]
    fixed_batch_share = model.estimated_peak_bytes(config, batch=config["batch"], shards=2, element_bytes=2) / B200
    assert fixed_batch_share < 0.07  # why: the profile's own batch alone uses a few per cent of a B200

    batch = model.sized_batch(config, capacity=B200, target=target, shards=2, element_bytes=2)
    share = model.estimated_peak_bytes(config, batch=batch, shards=2, element_bytes=2) / B200
    assert batch > config["batch"] and 0.4 < share <= target
    assert 2 * share > DEFAULT_THRESHOLDS["balance_high_fraction"]  # everything on one card: over the fail line
    assert model.sized_batch(config, capacity=B200, target=None, shards=2, element_bytes=2) == config["batch"]
    small = {**config, "batch": 512}
    assert model.sized_batch(small, capacity=B200, target=target, shards=2, element_bytes=2) == 512  # never below


def test_the_model_size_estimate_counts_the_parameters_torch_counts():
    from provisioning.preflight import model
    from provisioning.preflight.profile import DEVICE_DEFAULTS

    config = DEVICE_DEFAULTS["cpu"]["model"]
    built = model.PreflightModel(
        vocab=config["vocab"], dim=config["dim"], layers=config["layers"], hidden=config["hidden"]
    )
    assert model.parameter_count(config) == sum(parameter.numel() for parameter in built.parameters())

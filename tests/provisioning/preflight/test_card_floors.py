"""Floors per card: a card is held to its own figures, and a card without one is measured and warned, not failed.

The node's cards come from nvidia-smi's name and compute capability (recorded here as nvidia-smi prints them);
the rank-side rules are the checks' own merge functions, fed the per-rank results a real run would gather.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from provisioning.preflight import cards, nccl_tests
from provisioning.preflight.checks import stack
from provisioning.preflight.profile import DEFAULT_THRESHOLDS, resolve
from provisioning.preflight.report import Result
from tests.provisioning.preflight import fake_tools

GIB = 2**30


def gpus(name: str, capability: str, count: int = 2) -> list[dict[str, str]]:
    return [{"index": str(i), "name": name, "uuid": f"GPU-{i}", "compute_capability": capability} for i in range(count)]


def settings_for(node_gpus: list[dict[str, str]], profile: dict | None = None, world_size: int = 2):
    settings = resolve(profile or {}, source="built-in", sha256=None, device="cuda", world_size=world_size)
    thresholds, sources = cards.for_node(settings.thresholds, settings.thresholds_given, node_gpus)
    return dataclasses.replace(settings, thresholds=thresholds, threshold_sources=sources)


def test_each_card_gets_its_own_figures_with_their_source():
    b200 = settings_for(gpus("NVIDIA B200", "10.0"))
    h200 = settings_for(gpus("NVIDIA H200", "9.0"))
    a100 = settings_for(gpus("NVIDIA A100-SXM4-80GB", "8.0"))

    assert {key: b200.thresholds[key] for key in cards.CARD_KEYS} == {
        "min_cuda": "12.8",
        "min_driver": "570",
        "nvlink_min_active_links": 18,
        "busbw_floor_gbps": 603.0,
        "matmul_tflops_floor": 1308.8,
    }
    assert (h200.thresholds["matmul_tflops_floor"], h200.thresholds["busbw_floor_gbps"]) == (592.5, 328.5)
    assert (h200.thresholds["min_cuda"], h200.thresholds["min_driver"]) == ("11.8", None)
    assert h200.threshold_sources["matmul_tflops_floor"].startswith("H200 (sm_90): docs/PREFLIGHT.md")
    assert a100.thresholds["nvlink_min_active_links"] == 12 and a100.thresholds["min_cuda"] == "11.0"
    assert a100.thresholds["busbw_floor_gbps"] is None and a100.thresholds["matmul_tflops_floor"] is None
    assert a100.missing_figure("busbw_floor_gbps").startswith("no figure for A100")
    assert b200.missing_figure("busbw_floor_gbps") is None


def test_a_card_is_known_by_name_and_capability_together():
    assert cards.identify("NVIDIA B200", "10.0").family == "B200"
    assert cards.identify("NVIDIA B200", "9.0") is None  # a name that lies about the card gets no figure
    assert cards.identify("NVIDIA H100 PCIe", "9.0").nvlink_links is None  # PCIe: no SXM link count
    assert cards.identify("NVIDIA H100 80GB HBM3", "9.0").family == "H100"
    assert cards.identify("NVIDIA GeForce RTX 4090", "8.9") is None


def test_unknown_or_mixed_cards_have_no_floor_and_say_why():
    mixed = settings_for(gpus("NVIDIA B200", "10.0", 1) + gpus("NVIDIA H200", "9.0", 1))
    assert all(mixed.thresholds[key] is None for key in cards.CARD_KEYS)
    assert mixed.missing_figure("matmul_tflops_floor") == (
        "no figure for NVIDIA B200, NVIDIA H200: measured and recorded, not enforced"
    )
    assert mixed.threshold_sources["card"] == "unknown (NVIDIA B200, NVIDIA H200)"


def test_a_threshold_the_profile_sets_wins_over_the_card_figure():
    h200 = settings_for(gpus("NVIDIA H200", "9.0"), {"thresholds": {"busbw_floor_gbps": 300.0, "min_cuda": None}})
    assert h200.thresholds["busbw_floor_gbps"] == 300.0 and h200.threshold_sources["busbw_floor_gbps"] == "the profile"
    assert h200.thresholds["min_cuda"] is None and h200.missing_figure("min_cuda") is None  # disabled on purpose


def test_cuda_12_8_is_demanded_of_a_b200_only():
    hopper_stack = {"torch": "2.7.1+cu126", "cuda": "12.6", "nccl": "2.21.5", "gloo": True, "driver": "550.90.07"}
    h200 = settings_for(gpus("NVIDIA H200", "9.0"))
    b200 = settings_for(gpus("NVIDIA B200", "10.0"))

    on_h200 = stack.evaluate(hopper_stack, device="cuda", thresholds=h200.thresholds, card="H200 (sm_90)")
    on_b200 = stack.evaluate(hopper_stack, device="cuda", thresholds=b200.thresholds, card="B200 (sm_100)")
    assert on_h200.status == "pass" and "CUDA >= 11.8 for H200 (sm_90)" in on_h200.detail
    assert on_b200.status == "fail" and "built for CUDA 12.6; B200 (sm_100) needs CUDA 12.8+" in on_b200.detail
    assert "driver 550.90.07 is older than 570, the first for B200 (sm_100)" in on_b200.detail


@pytest.fixture
def torch_checks(require_torch):
    from provisioning.preflight.checks import allreduce, memory, step_time

    return SimpleNamespace(allreduce=allreduce, memory=memory, step_time=step_time)


def allreduce_results(busbw_gbps: float, world_size: int = 2) -> list[Result]:
    size = 8 * GIB
    seconds = size / (busbw_gbps * 1e9)  # two cards: busbw equals algbw
    metrics = {"bytes": size, "time_s": seconds, "wrong_contributed": 0, "wrong_result": 0, "contributed": 1.0}
    return [Result("allreduce", "pass", "", {**metrics, "expected": 3.0, "first_value": 3.0})] * world_size


def rank_context(settings) -> SimpleNamespace:
    return SimpleNamespace(settings=settings, is_cuda=True)


def test_two_h200_pass_allreduce_at_their_own_bandwidth_that_the_b200_floor_failed(torch_checks):
    two_h200 = allreduce_results(365.0)

    on_h200 = torch_checks.allreduce.merge(rank_context(settings_for(gpus("NVIDIA H200", "9.0"))), two_h200)
    held_to_b200 = torch_checks.allreduce.merge(rank_context(settings_for(gpus("NVIDIA B200", "10.0"))), two_h200)

    assert on_h200.status == "pass" and "floor 328.5 GB/s" in on_h200.detail
    assert on_h200.metrics["busbw_floor_source"].startswith("H200 (sm_90)")
    assert held_to_b200.status == "fail" and "below the floor 603.0 GB/s" in held_to_b200.detail


def test_a_card_without_a_bandwidth_figure_is_measured_and_warned(torch_checks):
    result = torch_checks.allreduce.merge(
        rank_context(settings_for(gpus("NVIDIA A100-SXM4-80GB", "8.0"))), allreduce_results(230.0)
    )
    assert result.status == "warn"
    assert "busbw 230.00 GB/s" in result.detail and "no floor: no figure for A100" in result.detail
    assert result.metrics["busbw_gbps"] == pytest.approx(230.0)


def test_a_single_h200_passes_the_matmul_probe_a_b200_floor_failed(torch_checks):
    rule = torch_checks.step_time.matmul_rule
    h200 = settings_for(gpus("NVIDIA H200", "9.0", 1), world_size=1)
    b200_floor = DEFAULT_THRESHOLDS["matmul_tflops_floor"]

    assert rule(750.0, h200.thresholds["matmul_tflops_floor"], None, "16384^3 bf16")[0] == "pass"
    assert rule(750.0, b200_floor, None, "16384^3 bf16")[0] == "fail"
    status, detail = rule(280.0, None, "no figure for A100 PCIe: measured and recorded, not enforced", "x")
    assert status == "warn" and "280 TFLOP/s with no floor (no figure for A100 PCIe" in detail


NCCL_TESTS_OUTPUT = """# nThread 1 nGpus 2 minBytes 8589934592 maxBytes 8589934592 warmup iters: 5 iters: 20
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  8589934592    2147483648     float     sum      -1    15854  541.80  541.80      0    15850  541.94  541.94      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 541.87
"""


def test_nccl_tests_output_is_read_and_wrong_values_are_refused():
    assert nccl_tests.parse(NCCL_TESTS_OUTPUT) == (541.87, "")
    broken = NCCL_TESTS_OUTPUT.replace("Out of bounds values : 0 OK", "Out of bounds values : 12 FAILED")
    assert nccl_tests.parse(broken) == (None, "it reported 12 wrong values")
    assert nccl_tests.parse("NCCL failure common.cu:1005 'unhandled cuda error'")[0] is None


def test_a_nodes_own_nccl_tests_figure_calibrates_its_floor_and_warns_under_the_card_figure(torch_checks):
    b200 = settings_for(gpus("NVIDIA B200", "10.0"))
    measured = {"command": "all_reduce_perf -b 8G -e 8G -g 2", "busbw_gbps": 541.87, "problem": ""}

    thresholds, sources = nccl_tests.calibrate(b200.thresholds, b200.threshold_sources, frozenset(), measured)
    calibrated = dataclasses.replace(b200, thresholds=thresholds, threshold_sources=sources)
    result = torch_checks.allreduce.merge(rank_context(calibrated), allreduce_results(530.0))

    assert thresholds["busbw_floor_gbps"] == 487.7
    assert sources["busbw_floor_gbps"].startswith("this node's `all_reduce_perf -b 8G -e 8G -g 2`: 541.87 GB/s x 0.9")
    assert "replaces 603.0 GB/s" in sources["busbw_floor_gbps"]
    assert result.status == "warn" and "under its card's documented 603.0 GB/s" in result.detail
    assert torch_checks.allreduce.merge(rank_context(calibrated), allreduce_results(400.0)).status == "fail"


def test_the_profiles_floor_is_not_calibrated_and_a_failed_nccl_tests_run_changes_nothing():
    h200 = settings_for(gpus("NVIDIA H200", "9.0"), {"thresholds": {"busbw_floor_gbps": 300.0}})
    measured = {"command": "all_reduce_perf -b 8G -e 8G -g 2", "busbw_gbps": 100.0, "problem": ""}
    assert nccl_tests.calibrate(h200.thresholds, {}, h200.thresholds_given, measured)[0]["busbw_floor_gbps"] == 300.0

    failed = {"command": "all_reduce_perf -b 8G -e 8G -g 2", "busbw_gbps": None, "problem": "exited 1: no figure"}
    thresholds, sources = nccl_tests.calibrate(DEFAULT_THRESHOLDS, {}, frozenset(), failed)
    assert thresholds["busbw_floor_gbps"] == 603.0 and "gave no figure: exited 1" in sources["nccl_tests"]


# --- end to end: the preflight looks its node's cards up before the gates (fake NVIDIA tools, fake CUDA torch) ---

HOST_ONLY = {"checks": ["stack", "idle_cards", "gpu_health", "nvlink", "dcgm_diag"]}


def node_run(preflight, folder, nvidia_smi, *, cuda: str = "12.8", all_reduce_perf=None, world_size: int = 2):
    tools = fake_tools.install(
        folder / "bin", nvidia_smi=nvidia_smi, dcgmi=fake_tools.DCGMI_PASS, all_reduce_perf=all_reduce_perf
    )
    env = fake_tools.environment(tools, cuda_cards=world_size, cuda=cuda)
    return preflight(folder, "--device", "cuda", "--world-size", str(world_size), profile=HOST_ONLY, env=env)


@pytest.mark.usefixtures("require_torch")
def test_two_h200_on_cuda_12_4_are_held_to_the_h200_figures_not_the_b200s(preflight, tmp_path):
    run = node_run(preflight, tmp_path, fake_tools.board(2, "NVIDIA H200", "9.0"), cuda="12.4")

    assert run.returncode == 0, run.stdout + run.stderr
    assert run.check("stack")["status"] == "pass"
    assert "CUDA >= 11.8 for H200 (sm_90)" in run.check("stack")["detail"]
    assert run.check("nvlink")["status"] == "pass"
    thresholds = run.report["thresholds"]
    assert (thresholds["matmul_tflops_floor"], thresholds["busbw_floor_gbps"], thresholds["min_cuda"]) == (
        592.5,
        328.5,
        "11.8",
    )
    assert run.report["threshold_sources"]["card"] == "H200 (sm_90)"


@pytest.mark.usefixtures("require_torch")
def test_two_a100_pass_nvlink_with_their_12_links_that_the_b200_rule_failed(preflight, tmp_path):
    run = node_run(preflight, tmp_path, fake_tools.board(2, "NVIDIA A100-SXM4-80GB", "8.0", links=12), cuda="11.8")

    nvlink = run.check("nvlink")
    assert run.returncode == 0, run.stdout + run.stderr
    assert nvlink["status"] == "pass" and ">= 12 active links" in nvlink["detail"]
    assert run.report["thresholds"]["busbw_floor_gbps"] is None
    assert run.report["threshold_sources"]["busbw_floor_gbps"].startswith("no figure for A100")


@pytest.mark.usefixtures("require_torch")
def test_a_b200_pair_on_cuda_12_6_still_fails_stack(preflight, tmp_path):
    run = node_run(preflight, tmp_path, fake_tools.TWO_B200, cuda="12.6")

    assert run.returncode == 1
    assert "built for CUDA 12.6; B200 (sm_100) needs CUDA 12.8+" in run.check("stack")["detail"]


def test_nccl_tests_on_the_node_calibrate_the_floor_before_the_ranks(tmp_path, monkeypatch):
    """The host runs the node's `all_reduce_perf` (a fake here) at 8 GiB on the ranks' cards, and reads its figure."""
    import argparse

    from provisioning.preflight import cli

    tools = fake_tools.install(
        tmp_path / "bin",
        nvidia_smi=fake_tools.TWO_B200,
        all_reduce_perf={"-b 8G -e 8G -g 2": fake_tools.ok(NCCL_TESTS_OUTPUT)},
    )
    monkeypatch.setenv("PATH", fake_tools.environment(tools)["PATH"])
    b200 = settings_for(gpus("NVIDIA B200", "10.0"))

    calibrated = cli.calibrated_by_nccl_tests(b200, argparse.Namespace(device="cuda", world_size=2))

    assert calibrated.thresholds["busbw_floor_gbps"] == 487.7
    assert calibrated.threshold_sources["busbw_below_card"].startswith("this node's nccl-tests floor 487.7 GB/s")
    one_card = cli.calibrated_by_nccl_tests(b200, argparse.Namespace(device="cuda", world_size=1))
    assert one_card.thresholds["busbw_floor_gbps"] == 603.0  # nothing to measure between cards


def test_one_h200_reports_no_bandwidth_for_an_allreduce_that_crosses_no_cards(torch_checks):
    # The first run on a real H200 (world size 1) reported "algbw 294929.33 GB/s" from timing a no-op.
    result = torch_checks.allreduce.merge(
        rank_context(settings_for(gpus("NVIDIA H200", "9.0", 1), world_size=1)), allreduce_results(365.0, 1)
    )
    assert result.status == "pass" and "no bandwidth measured" in result.detail and "GB/s," not in result.detail
    assert result.metrics["algbw_gbps"] is None and result.metrics["busbw_gbps"] is None

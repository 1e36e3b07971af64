"""The rules that need no torch: stack, profile, report merging, and the hardware gates' parsers.

The CUDA-side rules run here on recorded facts and tool output, since this machine has no GPU.
"""

from __future__ import annotations

import json

import pytest

from provisioning.preflight import hardware
from provisioning.preflight.checks import stack
from provisioning.preflight.profile import DEFAULT_THRESHOLDS, ProfileError, resolve
from provisioning.preflight.report import Result, merge_ranks
from provisioning.preflight.versions import at_least, cudnn_text, version_tuple

B200_STACK = {"torch": "2.7.1+cu128", "cuda": "12.8", "cudnn": "9.7.1", "nccl": "2.26.2", "gloo": True}


def evaluate_stack(device: str = "cuda", **versions) -> Result:
    return stack.evaluate(
        {**B200_STACK, "driver": "570.124.06", **versions}, device=device, thresholds=DEFAULT_THRESHOLDS
    )


def test_versions_compare_by_number_not_text():
    assert version_tuple("2.13.0+cpu") == (2, 13, 0)
    assert at_least("2.13.0+cpu", "2.7") and at_least("12.8", "12.8") and at_least("575.51.03", "570")
    assert not at_least("2.6.0+cu126", "2.7") and not at_least("12.6", "12.8") and not at_least(None, "2.7")
    assert cudnn_text(90701) == "9.7.1" and cudnn_text(8902) == "8.9.2"


def test_a_cu128_build_of_torch_2_7_passes_stack_on_cuda():
    result = evaluate_stack()
    assert result.status == "pass"
    assert "CUDA 12.8" in result.detail and "NCCL 2.26.2" in result.detail


def test_a_cu126_build_fails_stack_and_says_what_to_install():
    result = evaluate_stack(torch="2.6.0+cu126", cuda="12.6")
    assert result.status == "fail"
    assert result.detail.startswith("stack: torch 2.6.0+cu126 is older than 2.7")
    assert "built for CUDA 12.6; B200 (sm_100) needs CUDA 12.8+" in result.detail
    assert result.detail.endswith("install a CUDA 12.8+ build of PyTorch 2.7 or newer (the cu128 wheels or later)")


def test_missing_nccl_or_an_old_driver_fails_stack_on_cuda():
    assert "has no NCCL" in evaluate_stack(nccl=None).detail
    old_driver = evaluate_stack(driver="550.54.15")
    assert old_driver.status == "fail"
    assert (
        "driver 550.54.15 is older than 570" in old_driver.detail and "install NVIDIA driver 570" in old_driver.detail
    )


def test_stack_on_cpu_passes_without_cuda_but_still_requires_torch_2_7_and_gloo():
    cpu = evaluate_stack("cpu", torch="2.13.0+cpu", cuda=None, nccl=None, driver=None)
    assert cpu.status == "pass" and cpu.metrics["cuda_rule"] == "not applicable on cpu"
    assert evaluate_stack("cpu", torch="2.5.1+cpu", cuda=None).status == "fail"
    assert evaluate_stack("cpu", gloo=False).status == "fail"


def test_merged_failures_name_the_check_and_the_ranks():
    results = [Result("forward", "pass", "loss 1.0"), Result("forward", "fail", "the loss is nan: do this")]
    merged = merge_ranks("forward", results)
    assert merged.status == "fail"
    assert merged.detail == "forward failed on rank 1: the loss is nan: do this"
    both = merge_ranks("arch", [Result("arch", "fail", "no sm_100"), Result("arch", "fail", "no sm_100")])
    assert both.detail == "arch failed on rank 0, rank 1: no sm_100"


def test_the_profile_defaults_follow_the_device_and_world_size():
    cpu = resolve({}, source="built-in", sha256=None, device="cpu", world_size=2)
    cuda = resolve({}, source="built-in", sha256=None, device="cuda", world_size=2)
    single = resolve({}, source="built-in", sha256=None, device="cuda", world_size=1)
    assert cpu.shard and cuda.shard and not single.shard
    assert (cpu.compile, cuda.compile) == (False, True)
    assert cpu.allreduce["bytes"] == 16 * 2**20 and cuda.allreduce["bytes"] == 8 * 2**30
    assert cuda.thresholds["busbw_floor_gbps"] == pytest.approx(603.0)
    assert cuda.thresholds["matmul_tflops_floor"] == pytest.approx(0.75 * 1745, abs=0.1)


def test_a_profile_can_select_checks_disable_a_threshold_and_turn_compile_off():
    settings = resolve(
        {"checks": ["allreduce", "stack"], "compile": False, "thresholds": {"busbw_floor_gbps": None}, "shard": False},
        source="p.json",
        sha256="0" * 64,
        device="cuda",
        world_size=2,
    )
    assert settings.checks == ("stack", "allreduce")  # always in report order
    assert settings.thresholds["busbw_floor_gbps"] is None
    assert settings.compile is False and settings.shard is False


def test_an_extension_probe_needs_a_module_name():
    with pytest.raises(ProfileError, match="is not a module name"):
        resolve(
            {"extensions": [{"name": "x", "module": "a b", "op": "mod.f(x)"}]},
            source="p",
            sha256=None,
            device="cpu",
            world_size=2,
        )


NVLINK_STATUS = "GPU 0: NVIDIA B200 (UUID: GPU-aaaa)\n" + "".join(f"\t Link {i}: 50 GB/s\n" for i in range(18))
NVLINK_STATUS += "GPU 1: NVIDIA B200 (UUID: GPU-bbbb)\n" + "".join(
    f"\t Link {i}: {'<inactive>' if i in (3, 7) else '50 GB/s'}\n" for i in range(18)
)


def test_nvlink_fails_a_card_with_inactive_links():
    result = hardware.evaluate_nvlink(NVLINK_STATUS, DEFAULT_THRESHOLDS)
    assert result.status == "fail"
    assert "GPU 1 has 16 active links, 18 wanted" in result.detail
    assert [card["active"] for card in result.metrics["cards"]] == [18, 16]


def test_nvlink_passes_when_every_link_is_up_and_fails_when_none_is_reported():
    healthy = NVLINK_STATUS.replace("<inactive>", "50 GB/s")
    assert hardware.evaluate_nvlink(healthy, DEFAULT_THRESHOLDS).status == "pass"
    assert hardware.evaluate_nvlink("", DEFAULT_THRESHOLDS).status == "fail"


ECC = "0, GPU-aaaa, Enabled, 0, 0\n1, GPU-bbbb, Enabled, 2, 2\n"
REMAP = "GPU-aaaa, 0, 0, No, No\nGPU-bbbb, 0, 1, Yes, No\n"


def test_gpu_health_fails_on_uncorrected_ecc_errors_and_pending_row_remaps():
    result = hardware.evaluate_health(ECC, REMAP, DEFAULT_THRESHOLDS)
    assert result.status == "fail"
    assert "GPU 1: 2 uncorrected ECC errors since the last reset" in result.detail
    assert "GPU 1: row remaps are pending: reset the GPU" in result.detail
    assert "GPU 0" not in result.detail


def test_gpu_health_passes_clean_cards_and_reads_na_as_unknown():
    clean = "0, GPU-aaaa, Enabled, 0, [N/A]\n1, GPU-bbbb, Enabled, 0, 0\n"
    result = hardware.evaluate_health(clean, "GPU-aaaa, 0, 0, No, No\n", DEFAULT_THRESHOLDS)
    assert result.status == "pass"
    assert result.metrics["cards"][0]["uncorrected_aggregate"] is None


def test_idle_cards_fail_before_the_run_when_a_process_holds_a_card():
    memory = "0, GPU-aaaa, 0\n1, GPU-bbbb, 40213\n"
    apps = "GPU-bbbb, 4242, python, 40200\n"
    status, detail, _ = hardware.evaluate_idle(memory, apps, DEFAULT_THRESHOLDS, "before")
    assert status == "fail"
    assert detail.startswith("before: GPU 1 uses 40213 MiB held by pid 4242 python (40200 MiB)")
    assert "the node is not free" in detail
    idle = hardware.evaluate_idle("0, GPU-aaaa, 1\n1, GPU-bbbb, 0\n", "", DEFAULT_THRESHOLDS, "after")
    assert idle[0] == "pass"
    combined = hardware.idle_cards(("fail", detail, {}), idle)
    assert combined.status == "fail" and combined.detail.startswith("idle_cards failed: before: GPU 1")


DCGM_3 = {
    "DCGM GPU Diagnostic": {
        "test_categories": [
            {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}]},
            {
                "category": "Integration",
                "tests": [
                    {
                        "name": "PCIe",
                        "results": [
                            {"gpu_ids": "0", "status": "Pass"},
                            {"gpu_ids": "1", "status": "Fail", "warnings": [{"warning": "PCIe replay rate exceeded"}]},
                        ],
                    }
                ],
            },
        ]
    }
}
DCGM_4 = {
    "DCGM Diagnostic": {
        "tests": [
            {"name": "memory", "results": [{"entity_id": 0, "status": "Pass"}], "test_summary": {"status": "Pass"}}
        ]
    }
}


def test_dcgm_diag_fails_naming_the_test_and_the_card():
    result = hardware.evaluate_dcgm(json.dumps(DCGM_3), 2)
    assert result.status == "fail"
    assert "PCIe on GPU 1 (PCIe replay rate exceeded)" in result.detail
    assert result.metrics["failures"] == 1


def test_dcgm_diag_passes_a_clean_run_and_fails_unreadable_output():
    assert hardware.evaluate_dcgm(json.dumps(DCGM_4), 2).status == "pass"
    assert hardware.evaluate_dcgm("Error: unable to connect to host engine", 2).status == "fail"
    assert hardware.evaluate_dcgm("{}", 2).status == "fail"


@pytest.mark.parametrize("gate", [hardware.gpu_health, hardware.nvlink])
def test_the_gates_skip_on_cpu_with_the_reason(gate):
    result = gate("cpu", DEFAULT_THRESHOLDS)
    assert result.status == "skip" and "--device cuda" in result.detail


def test_a_gate_whose_tool_is_missing_skips_saying_which_tool(monkeypatch):
    monkeypatch.setattr(hardware.shutil, "which", lambda name: None)
    assert hardware.dcgm_diag("cuda", 2, 60).detail == "dcgmi not found on PATH"
    assert hardware.nvlink("cuda", DEFAULT_THRESHOLDS).detail == "nvidia-smi not found on PATH"

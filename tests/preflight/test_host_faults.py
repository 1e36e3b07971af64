"""The hardware gates on a real GPU node's faults, played with canned tool output (tests/preflight/fake_tools.py).

A tool that exits non-zero, a broken nvidia-smi line, links that are down, an untrained NVSwitch fabric, dcgmi's
errors: each is a failed gate quoting the tool, never an exception. The fake nvidia-smi and dcgmi go first on PATH.
"""

from __future__ import annotations

import json

import pytest

from provisioning.preflight import hardware
from provisioning.preflight.profile import DEFAULT_THRESHOLDS
from tests.preflight import fake_tools
from tests.preflight.fake_tools import ANY, UUIDS, ok

NO_DEVICES = ("No devices were found\n", "", 6)
UNKNOWN_ERROR = "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error"
DCGM_NO_HOST = "Error: unable to establish a connection to the specified host: localhost"


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """Install fakes of nvidia-smi (and dcgmi) first on PATH for the code under test in this process."""

    def install(nvidia_smi: dict, dcgmi: dict | None = None) -> None:
        folder = fake_tools.install(tmp_path / "bin", nvidia_smi=nvidia_smi, dcgmi=dcgmi)
        monkeypatch.setenv("PATH", fake_tools.environment(folder)["PATH"])

    return install


# --- item 1: a tool's failure and a malformed line are reported, never indexed --------------------------------


@pytest.mark.parametrize(
    ("stdout", "status", "message"),
    [
        ("No devices were found\n", 6, "No devices were found"),
        (f"0, {UUIDS[0]}, 0\n{UNKNOWN_ERROR}\n", 15, UNKNOWN_ERROR),
    ],
    ids=["no devices", "one card lost"],
)
def test_a_tool_that_exits_non_zero_is_an_error_with_its_own_message(on_path, stdout, status, message):
    on_path({ANY: (stdout, "", status)})

    with pytest.raises(hardware.ToolError, match=message):
        hardware.tool(["nvidia-smi", "--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"])


def test_gpu_health_fails_with_nvidia_smis_own_message_when_it_finds_no_device(on_path):
    on_path({ANY: NO_DEVICES})

    result = hardware.gpu_health("cuda", DEFAULT_THRESHOLDS)

    assert result.status == "fail"
    assert "No devices were found" in result.detail


def test_idle_cards_report_a_malformed_nvidia_smi_line_instead_of_crashing():
    memory = f"0, {UUIDS[0]}, 0\n{UNKNOWN_ERROR}\n"

    status, detail, _ = hardware.evaluate_idle(memory, "", DEFAULT_THRESHOLDS, "before")

    assert status == "fail"
    assert UNKNOWN_ERROR in detail and detail.startswith("before: nvidia-smi printed")


def test_gpu_health_reports_a_malformed_line_instead_of_skipping_it():
    ecc = f"0, {UUIDS[0]}, Enabled, 0, 0\n1, {UUIDS[1]}, Enabled\n"

    result = hardware.evaluate_health(ecc, "", DEFAULT_THRESHOLDS)

    assert result.status == "fail"
    assert f"1, {UUIDS[1]}, Enabled" in result.detail


# --- item 7: NVLink on one card, and which links count as active ----------------------------------------------


def test_nvlink_counts_a_link_active_only_with_a_positive_speed():
    speeds = ["53.125 GB/s", "<inactive>", "Down", "0 GB/s", "Not Supported", "26.562 GB/s"]
    text = fake_tools.nvlink_status([speeds])

    result = hardware.evaluate_nvlink(text, {"nvlink_min_active_links": 2})

    assert result.status == "pass"
    assert result.metrics["cards"][0]["active"] == 2


def test_nvlink_skips_a_single_card_with_the_reason(on_path):
    on_path({"nvlink --status": ok(fake_tools.nvlink_status([["<inactive>"] * 18]))})

    single = hardware.nvlink("cuda", DEFAULT_THRESHOLDS, world_size=1)
    pair = hardware.nvlink("cuda", DEFAULT_THRESHOLDS, world_size=2)

    assert single.status == "skip" and "one card" in single.detail
    assert pair.status == "fail"


# --- item 8: the NVSwitch fabric ------------------------------------------------------------------------------

FABRIC = "--query-gpu=index,fabric.state,fabric.status"
NVIDIA_SMI_Q = """
==============NVSMI LOG==============

Driver Version                            : 535.161.08
Attached GPUs                             : 2
GPU 00000000:18:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Persistence Mode                      : Enabled
    Fabric
        State                             : In Progress
        Status                            : N/A
    Pending Page Blacklist                : No
GPU 00000000:2A:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Fabric
        State                             : Completed
        Status                            : Success
"""


@pytest.mark.parametrize(
    ("answer", "status", "phrases"),
    [
        ("0, Completed, Success\n1, Completed, Success\n", "pass", ["2 cards", "Completed"]),
        (
            "0, In Progress, In Progress\n1, Not Started, N/A\n",
            "fail",
            ["GPU 0: fabric In Progress", "GPU 1: fabric Not Started", "systemctl status nvidia-fabricmanager"],
        ),
        (
            "0, Completed, Insufficient Resources\n1, Completed, Success\n",
            "fail",
            ["GPU 0: fabric Completed", "Insufficient Resources"],
        ),
        ("0, N/A, N/A\n", "skip", ["no NVSwitch fabric"]),
        ("0, Not Supported, Success\n", "skip", ["no NVSwitch fabric"]),
    ],
    ids=["trained", "not trained", "trained with an error", "pcie card", "single-gpu vm"],
)
def test_the_fabric_gate_reads_each_cards_state_and_status(on_path, answer, status, phrases):
    on_path({FABRIC: ok(answer)})

    result = hardware.fabric("cuda")

    assert result.status == status, result.detail
    for phrase in phrases:
        assert phrase in result.detail


def test_the_fabric_gate_falls_back_to_nvidia_smi_q_when_the_driver_knows_no_fabric_field(on_path):
    unknown = ('Field "fabric.state" is not a valid field to query.\n', "", 2)
    on_path({FABRIC: unknown, "-q": ok(NVIDIA_SMI_Q)})

    result = hardware.fabric("cuda")

    assert result.status == "fail"
    assert "GPU 0: fabric In Progress" in result.detail and "GPU 1" not in result.detail


def test_the_fabric_gate_fails_with_the_tools_message_and_skips_on_cpu(on_path):
    on_path({ANY: NO_DEVICES})

    assert "No devices were found" in hardware.fabric("cuda").detail
    assert hardware.fabric("cpu").status == "skip"


# --- item 12: dcgmi's errors on stdout and its runtime_error --------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [DCGM_NO_HOST, "Error: Unable to complete diagnostic for group 2. Return: (-37) The diagnostic could not run."],
)
def test_dcgm_diag_fails_with_dcgmis_own_error_line(message):
    result = hardware.evaluate_dcgm(f"{message}\n", 2)

    assert result.status == "fail"
    assert message in result.detail and "nv-hostengine" in result.detail


def test_dcgm_diag_fails_with_the_runtime_error_of_its_json():
    text = json.dumps({"version": "4.2.3", "runtime_error": "Couldn't open the GPUs: the NVIDIA driver is not loaded"})

    result = hardware.evaluate_dcgm(text, 2)

    assert result.status == "fail"
    assert "Couldn't open the GPUs: the NVIDIA driver is not loaded" in result.detail


def test_dcgm_diag_still_reads_the_json_of_a_run_that_exits_non_zero_because_a_test_failed(on_path):
    failed = {"DCGM Diagnostic": {"tests": [{"name": "pcie", "results": [{"entity_id": 1, "status": "Fail"}]}]}}
    on_path({}, dcgmi={"diag": (json.dumps(failed), "", 226)})

    result = hardware.dcgm_diag("cuda", 2, 60)

    assert result.status == "fail" and "pcie on GPU 1" in result.detail

"""The host side on a real GPU node's faults, played with canned tool output
(tests/provisioning/preflight/fake_tools.py).

No card, one card of two, a broken nvidia-smi line, a dcgmi error, an untrained NVSwitch fabric, CUDA that never
initialises: each must end in a written report and exit 0 or 1, never a traceback. The parsers' rules are tested
on the same recorded output; the end-to-end runs use the fake nvidia-smi and dcgmi first on PATH and, where the
card count or the versions are the point, the fake CUDA build of torch (tests/provisioning/preflight/fakes/cuda_torch).
"""

from __future__ import annotations

import json

import pytest

from provisioning.preflight import hardware
from provisioning.preflight.profile import DEFAULT_THRESHOLDS
from provisioning.preflight.report import CONTRACT_CHECKS
from tests.provisioning.preflight import fake_tools
from tests.provisioning.preflight.fake_tools import ANY, DCGMI_PASS, ONE_OF_TWO_B200, TWO_B200, UUIDS, ok

OTHER_RANK_CHECKS = [name for name in CONTRACT_CHECKS if name not in ("stack", "arch")]  # after `arch`
NO_DEVICES = ("No devices were found\n", "", 6)
UNKNOWN_ERROR = "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error"
DCGM_NO_HOST = "Error: unable to establish a connection to the specified host: localhost"
# The host checks only: no rank is spawned, so the fake CUDA build is never asked to run a kernel.
HOST_ONLY = {"checks": ["stack", "idle_cards", "gpu_health", "nvlink", "dcgm_diag"]}


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


# --- end to end: every canned fault writes a report and exits 0 or 1, never a traceback ------------------------

SCENARIOS = {
    # name: (nvidia-smi, dcgmi, fake CUDA cards or None for this machine's CPU-only torch, profile)
    "no card": ({ANY: NO_DEVICES}, None, 0, None),
    "one card of two": (ONE_OF_TWO_B200, DCGMI_PASS, 1, None),
    "broken nvidia-smi line": (
        TWO_B200
        | {
            "--query-gpu=index,uuid,memory.used": ok(f"0, {UUIDS[0]}, 0\n{UNKNOWN_ERROR}\n"),
            "--query-gpu=index,uuid,ecc.mode.current": ok(f"0, {UUIDS[0]}, Enabled, 0, 0\n1, {UUIDS[1]}, Enabled\n"),
        },
        DCGMI_PASS,
        2,
        HOST_ONLY,
    ),
    "dcgmi error": (TWO_B200, {"diag": (f"{DCGM_NO_HOST}\n", "", 255)}, 2, HOST_ONLY),
    "fabric not trained": (
        TWO_B200 | {FABRIC: ok("0, In Progress, In Progress\n1, Not Started, N/A\n")},
        DCGMI_PASS,
        2,
        None,
    ),
}
# The FAIL each scenario must show: (check, phrase in its detail).
EXPECTED = {
    "no card": ("arch", "0 of 2 cards visible"),
    "one card of two": ("arch", "1 of 2 cards visible"),
    "broken nvidia-smi line": ("idle_cards", UNKNOWN_ERROR),
    "dcgmi error": ("dcgm_diag", DCGM_NO_HOST),
    "fabric not trained": ("fabric", "GPU 1: fabric Not Started"),
}


@pytest.fixture(scope="module")
def node(require_torch, preflight, tmp_path_factory):
    """`node(scenario)`: the preflight's run on that canned node (--device cuda, two cards asked), once per module."""
    runs = {}

    def run(name: str):
        if name not in runs:
            nvidia_smi, dcgmi, cards, profile = SCENARIOS[name]
            folder = tmp_path_factory.mktemp(name.replace(" ", "-"))
            tools = fake_tools.install(folder / "bin", nvidia_smi=nvidia_smi, dcgmi=dcgmi)
            env = fake_tools.environment(tools, cuda_cards=cards)
            runs[name] = preflight(folder, "--device", "cuda", "--world-size", "2", profile=profile, env=env)
        return runs[name]

    return run


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_canned_fault_writes_a_report_and_exits_0_or_1_never_a_traceback(node, scenario):
    run = node(scenario)
    check, phrase = EXPECTED[scenario]

    assert run.report is not None, f"no report was written:\n{run.stdout}\n{run.stderr}"
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert run.check(check)["status"] == "fail"
    assert phrase in run.check(check)["detail"]


@pytest.mark.parametrize("scenario", ["no card", "one card of two"])
def test_too_few_cards_fail_arch_skip_the_rank_checks_and_still_run_the_hardware_gates(node, scenario):
    run = node(scenario)
    visible = "0 of 2" if scenario == "no card" else "1 of 2"

    assert run.check("arch")["detail"].startswith(f"arch failed: {visible} cards visible")
    for name in OTHER_RANK_CHECKS:
        assert run.check(name) | {"metrics": {}} == {
            "name": name,
            "status": "skip",
            "detail": f"not run: {visible} cards visible",
            "metrics": {},
        }
    if scenario == "no card":  # the gates ran and say what nvidia-smi said
        assert "No devices were found" in run.check("arch")["detail"]
        assert "No devices were found" in run.check("gpu_health")["detail"]
        assert run.check("gpu_health")["status"] == "fail"
    else:
        gates = ["stack", "gpu_health", "fabric", "nvlink", "dcgm_diag", "idle_cards"]
        assert {name: run.check(name)["status"] for name in gates} == dict.fromkeys(gates, "pass")
        assert "GPU 0 NVIDIA B200" in run.check("arch")["detail"]


def test_a_broken_nvidia_smi_line_fails_each_gate_that_reads_it_and_the_other_gates_still_run(node):
    run = node("broken nvidia-smi line")

    assert run.check("idle_cards")["detail"].startswith("idle_cards failed: before: nvidia-smi printed a line")
    assert run.check("gpu_health")["status"] == "fail"
    assert f"1, {UUIDS[1]}, Enabled" in run.check("gpu_health")["detail"]
    assert run.check("nvlink")["status"] == run.check("dcgm_diag")["status"] == "pass"


def test_an_untrained_fabric_fails_the_fabric_gate_and_the_ranks_are_not_spawned(node):
    run = node("fabric not trained")

    fabric = run.check("fabric")
    assert "start nvidia-fabricmanager" in fabric["detail"] and "reset" in fabric["detail"]
    for name in ["arch", *OTHER_RANK_CHECKS]:
        assert run.check(name)["status"] == "skip"
        assert run.check(name)["detail"] == "not run: the NVSwitch fabric is not ready"


# --- item 4: a CPU-only build on --device cuda still runs the hardware gates ------------------------------------


@pytest.mark.usefixtures("require_torch")
def test_a_cpu_only_build_on_cuda_fails_stack_and_still_runs_the_hardware_gates(preflight, tmp_path):
    tools = fake_tools.install(tmp_path / "bin", nvidia_smi=TWO_B200, dcgmi=DCGMI_PASS)

    run = preflight(tmp_path, "--device", "cuda", "--world-size", "2", env=fake_tools.environment(tools))

    assert run.returncode == 1, run.stdout + run.stderr
    assert run.check("stack")["status"] == "fail" and "CPU-only build" in run.check("stack")["detail"]
    gates = ["gpu_health", "fabric", "nvlink", "dcgm_diag", "idle_cards"]
    assert {name: run.check(name)["status"] for name in gates} == dict.fromkeys(gates, "pass")
    assert {run.check(name)["detail"] for name in ["arch", *OTHER_RANK_CHECKS]} == {
        "not run: the stack cannot run on this device"
    }
    assert [card["uuid"] for card in run.report["versions"]["node_gpus"]] == list(UUIDS)


# --- items 5 and 8: the torch/CUDA facts come from a child process, after the idle snapshot, under a timeout -----


@pytest.mark.usefixtures("require_torch")
def test_the_launcher_never_asks_cuda_itself_and_asks_only_after_the_idle_snapshot(preflight, tmp_path):
    tools = fake_tools.install(tmp_path / "bin", nvidia_smi=TWO_B200, dcgmi=DCGMI_PASS)
    log = tmp_path / "calls.log"
    env = fake_tools.environment(tools, cuda_cards=2, call_log=log)

    run = preflight(tmp_path, "--device", "cuda", "--world-size", "2", profile=HOST_ONLY, env=env)

    assert run.report is not None, run.stdout + run.stderr
    calls = [line.split(" ", 1) for line in log.read_text().splitlines()]
    launcher = {pid for pid, call in calls if call.startswith("nvidia-smi")}
    asked_cuda = [(number, pid) for number, (pid, call) in enumerate(calls) if call.startswith("torch.")]
    first_idle = next(number for number, (_, call) in enumerate(calls) if "memory.used" in call)
    assert len(launcher) == 1 and asked_cuda, calls
    assert all(pid not in launcher for _, pid in asked_cuda), calls
    assert all(number > first_idle for number, _ in asked_cuda), calls
    assert run.report["versions"]["cuda"] == "12.8" and run.report["versions"]["nccl"] == "2.26.2"


@pytest.mark.usefixtures("require_torch")
def test_cuda_that_never_initialises_fails_stack_within_the_timeout_and_the_report_is_written(preflight, tmp_path):
    hanging = tmp_path / "hanging_torch" / "torch"
    hanging.mkdir(parents=True)
    # FAKE torch whose import blocks, as cuInit does on an HGX board whose NVSwitch fabric is not trained.
    (hanging / "__init__.py").write_text("import time\n\ntime.sleep(600)\n")
    tools = fake_tools.install(tmp_path / "bin", nvidia_smi=TWO_B200, dcgmi=DCGMI_PASS)
    env = fake_tools.environment(tools) | {"PYTHONPATH": str(hanging.parent)}

    run = preflight(tmp_path, "--device", "cuda", "--world-size", "2", "--cuda-init-timeout", "3", env=env, timeout=60)

    assert run.report is not None, run.stdout + run.stderr
    assert run.returncode == 1 and "Traceback" not in run.stderr
    stack = run.check("stack")
    assert stack["status"] == "fail"
    assert stack["detail"].startswith("stack: CUDA did not initialise within 3 s")
    assert "nvidia-fabricmanager" in stack["detail"] and "driver" in stack["detail"]
    assert run.check("arch")["detail"] == "not run: CUDA did not initialise"
    assert run.check("gpu_health")["status"] == "pass"
    assert run.report["duration_s"] < 30

"""A failure on one rank is blamed on that rank, with its own error, even when it breaks the collectives.

The subprocess runs play test-only faults: a rank that runs out of memory in the middle of the FSDP forward
while the other waits in a collective, and a results exchange that dies with a CUDA error (as NCCL's does
after a sticky CUDA error). The unit tests feed the launcher's bookkeeping the files a rank leaves behind.
"""

from __future__ import annotations

import json

import pytest

from tests.provisioning.preflight.helpers import extension

pytestmark = pytest.mark.usefixtures("require_torch")

TWO_CPU_RANKS = ("--device", "cpu", "--world-size", "2")

# What a cu126 build prints on a B200: the error, then three lines of boilerplate.
CUDA_TRACEBACK = """Traceback (most recent call last):
  File "provisioning/preflight/worker.py", line 84, in main
    run_stages(ctx)
  File "provisioning/preflight/checks/arch.py", line 98, in launch
    torch.ones(8, device=ctx.device).sum().item()
torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""


def test_a_rank_out_of_memory_mid_forward_is_blamed_and_the_rank_waiting_for_it_is_not(preflight, tmp_path):
    checks = ["load", "forward", "backward", "allreduce"]
    run = preflight(
        tmp_path, *TWO_CPU_RANKS, "--timeout", "120", "--inject", "oom-in-forward:1", profile={"checks": checks}
    )

    forward = run.check("forward")
    assert run.returncode == 1, run.stdout + run.stderr
    assert forward["status"] == "fail"
    assert forward["detail"].startswith(
        "forward failed on rank 1: forward raised OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    assert forward["detail"].endswith("; rank 0 timed out waiting for it in a collective")
    assert "failed on rank 0" not in forward["detail"]
    assert forward["metrics"]["collective_timeout_s"] == 30  # a quarter of the 120 s deadline
    for name in ("backward", "allreduce"):
        assert run.check(name)["status"] == "skip"
        assert run.check(name)["detail"].startswith("not reached: forward failed on rank 1")
    # The collective timeout, not the launcher's deadline, ended the wait: the report says so, not the duration
    # (under load in CI the ranks' start-up alone took 30 to 45 s, so a bound on the run's seconds failed).
    assert "hard timeout" not in json.dumps(run.report)
    assert run.report["injected_faults"] == ["oom-in-forward:1"]


def test_a_results_exchange_that_dies_keeps_the_verdict_the_ranks_recorded(preflight, tmp_path):
    broken = extension("flash-attn-cu126", "broken_extension", "mod.fused_gelu(x)")
    profile = {"checks": ["extensions", "load"], "extensions": [broken]}
    run = preflight(tmp_path, *TWO_CPU_RANKS, "--inject", "exchange-fails:1", profile=profile)

    extensions = run.check("extensions")
    assert run.returncode == 1, run.stdout + run.stderr
    assert extensions["status"] == "fail"
    assert extensions["detail"].startswith(
        "extensions failed on rank 0, rank 1: flash-attn-cu126: `mod.fused_gelu(x)` raised RuntimeError:"
        " CUDA error: no kernel image is available for execution on the device"
    )
    assert "rank 1 raised RuntimeError: CUDA error: an illegal memory access was encountered" in extensions["detail"]
    assert "TORCH_USE_CUDA_DSA" not in extensions["detail"]
    assert [rank["probes"][0]["name"] for rank in extensions["metrics"]["ranks"]] == ["flash-attn-cu126"] * 2
    assert run.check("load")["detail"] == "not reached: extensions failed on rank 0, rank 1"
    assert run.report["injected_faults"] == ["exchange-fails:1"]


def test_a_cuda_traceback_is_quoted_by_its_error_line_not_its_boilerplate(tmp_path):
    from provisioning.preflight import launcher, worker

    (tmp_path / "rank-0.stage").write_text("arch:gather")
    (tmp_path / "rank-1.stage").write_text("arch")
    (tmp_path / "rank-1.error").write_text(CUDA_TRACEBACK)
    results = {}
    launcher.fill_unfinished(results, tmp_path, 2, ("crash", 1, "exited with exit status 1"), worker.RANK_CHECKS)

    detail = results["arch"].detail
    assert detail.startswith("arch failed on rank 1: rank 1 exited with exit status 1")
    assert "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device" in detail
    assert "TORCH_USE_CUDA_DSA" not in detail


def test_the_first_error_line_of_a_chained_traceback_is_the_cause():
    from provisioning.preflight.launcher import first_error_line

    chained = CUDA_TRACEBACK + (
        "\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\ntorch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp\n'
    )
    expected = "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device"
    assert first_error_line(chained) == expected
    assert first_error_line("RuntimeError: CUDA error: an illegal memory access was encountered\nCompile with x") == (
        "RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert first_error_line("Killed\n") == "Killed"


def test_a_rank_whose_exchange_failed_while_waiting_is_not_blamed_the_rank_behind_is(tmp_path):
    from provisioning.preflight import launcher, worker

    (tmp_path / "rank-0.stage").write_text("forward:gather")
    (tmp_path / "rank-1.stage").write_text("forward")
    problem = ("crash", 0, "raised RuntimeError: Connection closed by peer [127.0.0.1]:5000")
    results = dict.fromkeys(("arch", "extensions", "load"))  # recorded by rank 0 before forward
    launcher.fill_unfinished(results, tmp_path, 2, problem, worker.RANK_CHECKS)

    forward = results["forward"]
    assert forward.status == "fail"
    assert forward.detail.startswith("forward failed on rank 1: rank 1 did not reach the results exchange")
    assert "rank 0 raised RuntimeError: Connection closed by peer" in forward.detail
    assert results["backward"].detail == "not reached: forward failed on rank 1"


def test_a_recorded_error_is_blamed_when_the_rank_waiting_for_it_is_killed_in_a_collective(tmp_path):
    """NCCL's watchdog aborts a rank whose collective timed out: the other rank's recorded error is the cause."""
    from provisioning.preflight import launcher, worker

    oom = {
        "name": "forward",
        "status": "fail",
        "detail": "forward raised OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "metrics": {},
    }
    (tmp_path / "rank-0.stage").write_text("forward")
    (tmp_path / "rank-1.stage").write_text("forward:gather")
    (tmp_path / "rank-1.results.jsonl").write_text(json.dumps(oom) + "\n")
    results = dict.fromkeys(("arch", "extensions", "load"))
    launcher.fill_unfinished(results, tmp_path, 2, ("crash", 0, "exited with signal SIGABRT"), worker.RANK_CHECKS)

    forward = results["forward"]
    assert forward.detail.startswith("forward failed on rank 1: forward raised OutOfMemoryError: CUDA out of memory")
    assert "rank 0 exited with signal SIGABRT while still in forward" in forward.detail
    assert "failed on rank 0" not in forward.detail
    assert results["backward"].detail == "not reached: forward failed on rank 1"

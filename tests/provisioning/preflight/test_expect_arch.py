"""`--expect-arch sm_100` on a device without that architecture fails `arch`: never a skip."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("require_torch")


def test_expect_arch_sm_100_on_cpu_fails_arch_and_exits_one(preflight, tmp_path):
    run = preflight(tmp_path, "--device", "cpu", "--world-size", "2", "--expect-arch", "sm_100")

    arch = run.check("arch")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.report["ok"] is False
    assert arch["status"] == "fail"
    assert arch["detail"].startswith("arch failed on rank 0, rank 1:")
    assert "sm_100" in arch["detail"] and "--device cuda" in arch["detail"]
    assert [rank["expect_arch"] for rank in arch["metrics"]["ranks"]] == ["sm_100", "sm_100"]
    # The other checks still run and pass: one failure never hides the rest of the evidence.
    failed = [name for name, status in run.statuses().items() if status == "fail"]
    assert failed == ["arch"]
    assert run.statuses()["checkpoint_restore"] == run.statuses()["allreduce"] == "pass"

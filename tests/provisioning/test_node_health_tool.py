"""The health probe's node tool (provisioning/node_tools/health.py) reads what nvidia-smi and the kernel log say
as a person would: a card missing, uncorrectable ECC errors, pending remaps, links down, hardware slowdowns and
new XID errors fail; what it cannot read is a warning or a skip with the reason, never a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from provisioning.node_tools import health, xid_watch
from tests.provisioning.preflight.fake_tools import UUIDS, nvlink_status
from tests.servers import server_missing

TOOL = Path(health.__file__)


def cards(volatile: int = 0, aggregate: int = 0, retired: str = "No", count: int = 2) -> str:
    return "".join(f"{i}, {UUIDS[i]}, 0000:1B:00.0, {volatile}, {aggregate}, {retired}\n" for i in range(count))


def statuses(findings: list[dict]) -> dict[str, str]:
    return {item["check"]: item["status"] for item in findings}


def test_a_missing_card_and_uncorrectable_ecc_errors_fail_while_old_ones_only_warn():
    findings, _ = health.evaluate_cards(cards(count=1), 2)
    assert findings[0] == {"check": "cards", "status": "fail", "detail": "1 of 2 cards listed by nvidia-smi"}
    assert statuses(health.evaluate_cards(cards(volatile=2), 2)[0]) == {"cards": "pass", "ecc": "fail"}
    assert statuses(health.evaluate_cards(cards(aggregate=3), 2)[0]) == {"cards": "pass", "ecc": "warn"}
    # [N/A] where a card does not count is no error
    assert statuses(health.evaluate_cards(cards().replace(", 0, 0,", ", [N/A], [N/A],"), 2)[0])["ecc"] == "pass"


def test_retired_pages_pending_and_a_failed_row_remap_fail():
    _, rows = health.evaluate_cards(cards(retired="Yes"), 2)
    assert health.evaluate_memory_repair(rows, "")["status"] == "fail"
    _, rows = health.evaluate_cards(cards(), 2)
    remap = f"{UUIDS[0]}, 0, 1, No, Yes\n{UUIDS[1]}, 0, 0, Yes, No\n"
    result = health.evaluate_memory_repair(rows, remap)
    assert result["status"] == "fail"
    assert result["detail"] == "GPU 0: row remapping failed; GPU 1: row remaps pending (needs a GPU reset)"
    assert health.evaluate_memory_repair(rows, f"{UUIDS[0]}, 0, 0, No, No\n")["status"] == "pass"


def test_an_inactive_or_down_nvlink_fails_and_a_board_without_nvlink_is_skipped():
    up = nvlink_status([["53.125 GB/s"] * 18] * 2)
    assert health.evaluate_nvlink(up) == {"check": "nvlink", "status": "pass", "detail": "36 links up"}
    down = nvlink_status([["53.125 GB/s"] * 17 + ["<inactive>"], ["53.125 GB/s"] * 17 + ["Down"]])
    result = health.evaluate_nvlink(down)
    assert result["status"] == "fail"
    assert result["detail"] == "2 of 36 links down: GPU 0 link 17: <inactive>; GPU 1 link 17: Down"
    assert health.evaluate_nvlink("")["status"] == "skip"


def test_hardware_slowdowns_fail_and_a_software_thermal_slowdown_warns():
    assert health.evaluate_throttle("0, Not Active, Not Active, Not Active, Not Active\n")["status"] == "pass"
    both = "0, Not Active, Active, Not Active, Not Active\n1, Not Active, Not Active, Active, Active\n"
    result = health.evaluate_throttle(both)
    assert result["status"] == "fail"
    assert result["detail"] == "GPU 0: hw thermal slowdown; GPU 1: hw power brake slowdown; GPU 1: sw thermal slowdown"
    assert health.evaluate_throttle("0, Not Active, Not Active, Not Active, Active\n")["status"] == "warn"


XID_79 = "[ 9000.250000] NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
XID_13 = "[ 9100.000000] NVRM: Xid (PCI:0000:1b:00): 13, pid=99, Graphics Exception: ESR 0x404600"


def test_an_xid_after_the_cursor_fails_once_and_the_next_read_skips_it():
    log = f"[ 10.000000] Linux version 6.8\n{XID_79}\n[ 9001.000000] usb 1-1: new device\n"
    result, last = health.evaluate_xids(log, None)
    assert result["status"] == "fail" and result["detail"].startswith("XID 79 on 0000:1b:00: pid=1234")
    assert last == 9001.0
    again = health.evaluate_xids(log, last)[0]
    assert again == {"check": "xid", "status": "pass", "detail": "no new XID error in the kernel log"}
    # A tenant's own program faulting (XID 13) is shown, not held against the node
    assert health.evaluate_xids(log + XID_13 + "\n", last)[0]["status"] == "warn"


# A tenant's program (no root) that runs an invalid instruction from the file named on its command line, mapped
# executable: the kernel logs "traps: ... trap invalid opcode ... in <the file's name>[...]" (issue 39).
TRAP = """
import ctypes, os, sys
with open(sys.argv[1], "wb") as handle:
    handle.write(b"\\x0f\\x0b" + b"\\x90" * 4094)  # ud2
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
address = libc.mmap(None, 4096, 0x1 | 0x4, 0x02, os.open(sys.argv[1], os.O_RDONLY), 0)  # read | exec, private
ctypes.CFUNCTYPE(None)(address)()
"""
FORGED_NAME = "x NVRM: Xid (PCI:0000:1b:00): 79, pid=1, GPU has fallen off the bus"


def test_a_tenants_own_trap_line_that_quotes_an_xid_is_no_gpu_fault(tmp_path):
    # Given the real kernel log, and a tenant program (as nobody, where the suite runs as root) that faults in a file
    # named like the driver's "XID 79, fallen off the bus" line
    text, source = health.kernel_log()
    if text is None:
        server_missing(f"a readable kernel log ({source})")
    before = health.evaluate_xids(text, None)[1]
    folder = Path(tempfile.mkdtemp(prefix="tenant-"))
    folder.chmod(0o777)
    as_tenant = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    crashed = subprocess.run(["/usr/bin/python3", "-c", TRAP, str(folder / FORGED_NAME)], timeout=60, **as_tenant)
    assert crashed.returncode == -signal.SIGILL

    # When the probe reads the kernel log past its cursor
    text = health.kernel_log()[0]
    assert "trap invalid opcode ip:" in text and f"in {FORGED_NAME}[" in text  # the kernel logged the attack
    result, _ = health.evaluate_xids(text, before)

    # Then the trap line is no XID: only the driver's own NVRM records, read whole, count (before: XID 79, fail)
    assert result == {"check": "xid", "status": "pass", "detail": "no new XID error in the kernel log"}, result


def test_an_xid_record_counts_as_dmesg_and_the_journal_print_it_and_never_inside_another_message():
    driver = "NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
    for line in (f"[ 9000.250000] {driver}", f"[ 9000.250000] gpu-node-1 kernel: {driver}"):
        assert health.evaluate_xids(line + "\n", None)[0]["status"] == "fail", line
    for line in (
        f"[ 9000.250000] traps: python3[77] trap invalid opcode ip:7f00 sp:7ff0 error:0 in x {driver}[0,7f00+1000]",
        f"[ 9000.250000] audit: type=1400 msg='{driver}'",
        f"[ 9000.250000] NVRM: Xid (PCI:[1234]: segfault at 0 ip 0 sp 0 error 4 in {driver}",
    ):
        assert health.evaluate_xids(line + "\n", None)[0]["status"] == "pass", line


def test_a_cursor_of_another_boot_reads_the_log_from_its_start():
    assert health.parse_cursor("boot-a@9001.000000", "boot-a") == 9001.0
    assert health.parse_cursor("boot-a@9001.000000", "boot-b") is None
    assert health.parse_cursor("", "boot-b") is None
    assert health.parse_cursor("boot-b@garbage", "boot-b") is None


def fake(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n# FAKE {name}, written by tests/provisioning/test_node_health_tool.py\n{body}\n")
    path.chmod(0o755)


def run_tool(folder: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60, env={"PATH": str(folder)}
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_node_login_that_may_not_read_the_kernel_log_gets_a_warning_not_a_crash(tmp_path):
    # Given a node where dmesg is restricted for this login, the journal too, and no nvidia-smi (a CPU node)
    fake(tmp_path, "dmesg", 'echo "dmesg: read kernel buffer failed: Operation not permitted" >&2; exit 1')
    fake(tmp_path, "journalctl", 'echo "No journal files were opened due to insufficient permissions." >&2; exit 1')

    # When the tool runs
    report = run_tool(
        tmp_path, "--expect-gpus", "2", "--path", str(tmp_path), "--path", "/no/such/folder",
        "--xid-log", str(tmp_path / "no-watcher.jsonl"),
    )  # fmt: skip

    # Then it answers: healthy, the kernel log a warning with the reason, the GPU checks skipped, one disk checked
    assert report["healthy"] is True
    found = {item["check"]: item for item in report["findings"] if item["check"] != "disk"}
    xid = found["xid_kernel_log"]
    assert xid["status"] == "warn" and "Operation not permitted" in xid["detail"]
    assert found["cards"]["status"] == "skip"
    disks = [item["status"] for item in report["findings"] if item["check"] == "disk"]
    assert disks == ["pass", "skip"]


def test_a_gpu_node_whose_nvidia_smi_is_gone_or_broken_fails(tmp_path):
    fake(tmp_path, "dmesg", "echo '[ 1.000000] Linux version 6.8'")
    report = run_tool(tmp_path, "--expect-gpus", "2", "--require-gpus")
    assert report["healthy"] is False and statuses(report["findings"])["cards"] == "fail"
    fallen = "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error"
    fake(tmp_path, "nvidia-smi", f'echo "{fallen}"; exit 15')
    report = run_tool(tmp_path, "--expect-gpus", "2")
    assert report["healthy"] is False
    assert "Unknown Error" in next(item["detail"] for item in report["findings"] if item["check"] == "cards")


FORGED = "[ 9000.250000] traps: python3[77] trap invalid opcode in x NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off"


def xid_log(folder: Path, *events: dict) -> Path:
    log = folder / "b200-health" / "xid.jsonl"
    log.parent.mkdir(mode=0o755, exist_ok=True)
    with open(log, "a") as handle:
        for event in events:
            handle.write(json.dumps(event) + "\n")
    return log


def test_xids_come_from_the_watchers_log_and_the_kernel_log_is_not_read_then(tmp_path, monkeypatch):
    # Given the watcher's log (root's alone) with an XID 79 from NVML, and a kernel log a tenant filled
    log = xid_log(tmp_path, {"at": 2000.0, "index": 0, "uuid": UUIDS[0], "xid": 79})
    monkeypatch.setattr(health, "kernel_log", lambda: (FORGED + "\n", "dmesg"))

    # When the probe reads XIDs since 1000, then again from its cursor
    first, cursor = health.check_xids("", 1000.0, str(log))
    again, _ = health.check_xids(cursor, 1000.0, str(log))

    # Then the NVML event fails the node once, named by its card; the next read finds nothing new
    assert first == {"check": "xid", "status": "fail", "detail": f"XID 79 on {UUIDS[0]} (NVML)"}
    assert cursor == "xidlog@2000.0"
    assert again == {"check": "xid", "status": "pass", "detail": "no new XID event from NVML"}
    # And an XID a tenant's program causes (13) is shown, not held against the node
    xid_log(tmp_path, {"at": 2001.0, "index": 1, "uuid": UUIDS[1], "xid": 13})
    assert health.check_xids(cursor, 1000.0, str(log))[0]["status"] == "warn"


def test_a_watcher_log_someone_else_could_write_is_not_trusted(tmp_path, monkeypatch):
    # Given a log that another login may write into (a folder open to all), holding a made-up XID 79
    log = xid_log(tmp_path, {"at": 2000.0, "index": 0, "uuid": UUIDS[0], "xid": 79})
    log.parent.chmod(0o777)
    monkeypatch.setattr(health, "kernel_log", lambda: ("[ 10.000000] Linux version 6.8\n", "dmesg"))

    # When the probe reads XIDs
    result, _ = health.check_xids("", 1000.0, str(log))

    # Then the log is ignored: the kernel log is read, under its own name (the shop asks a person before credit)
    assert result == {"check": "xid_kernel_log", "status": "pass", "detail": "no new XID error in the kernel log"}


def test_the_watcher_logs_each_nvml_event_with_its_time_and_rotates_a_large_log(tmp_path, monkeypatch):
    # Given NVML's events (a FAKE: no GPU, no NVML on this machine) and a small rotation size
    events = iter([{"index": 0, "uuid": UUIDS[0], "xid": 79}, {"index": 1, "uuid": UUIDS[1], "xid": 48}])
    monkeypatch.setattr(xid_watch, "ROTATE_BYTES", 10)
    log = tmp_path / "b200-health" / "xid.jsonl"

    # When the watcher writes them
    written = xid_watch.watch(events, str(log), clock=iter([100.5, 101.25]).__next__)

    # Then each is one JSON line with its time, the first rotated to .1 once the log was past the size; the
    # log's folder and file are root's alone, which the probe checks before it trusts them
    assert written == 2
    assert json.loads((tmp_path / "b200-health" / "xid.jsonl.1").read_text()) == {
        "at": 100.5, "index": 0, "uuid": UUIDS[0], "xid": 79,
    }  # fmt: skip
    assert json.loads(log.read_text())["xid"] == 48
    assert health.root_only(str(log)) == "" and oct(log.stat().st_mode & 0o777) == "0o644"
    assert health.check_xids("", 100.0, str(log))[0]["detail"].startswith(f"XID 79 on {UUIDS[0]} (NVML); XID 48")


def test_the_watcher_says_so_when_nvml_cannot_be_loaded():
    with pytest.raises(xid_watch.Failed, match="NVML cannot be loaded"):
        next(xid_watch.nvml_events("libnvidia-ml-absent.so.1"))

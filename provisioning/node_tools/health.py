"""The health probe of a rented node: runs ON the node (Python 3.8+, standard library only), every few minutes
while a tenant works there, so it never loads the cards, never reads the tenant's files, and ends in seconds.

    python3 health.py [--expect-gpus 2] [--require-gpus] [--kernel-cursor CURSOR] [--since EPOCH]
                      [--xid-log /var/lib/b200-health/xid.jsonl] [--path /home] [--path /scratch]
                      [--min-free-percent 5]

Prints one JSON object: {"findings": [{check, status, detail}, ...], "kernel_cursor": "...", "healthy": bool}.
A status is pass, fail (the node is not fit: the shop marks it degraded), warn (shown, not held against the node)
or skip (not checked here, and why). A source that cannot be read (no nvidia-smi on a development node, a kernel
log this login may not read) is a warn or a skip with the reason, never a crash.

Checks: `cards` (nvidia-smi lists the expected number), `xid` (XID errors since the cursor, from the event log
that the node's xid_watch.py writes from NVML as root, where no tenant writes: `xidlog@epoch`), or, on a node
without that log, `xid_kernel_log` (the driver's `NVRM: Xid` records in the kernel log since the cursor:
`boot_id@seconds`; a different boot reads from its start; the shop asks a person before such a fault credits
time, since text in the kernel log is not proof), `ecc` (uncorrectable ECC errors, volatile and
aggregate), `memory_repair` (retired pages pending, pending or failed row remaps), `nvlink` (links down),
`throttle` (hardware slowdown, thermal or power brake), `disk` (free space on each --path).
"""

from __future__ import annotations

# ruff: noqa: S603 - the tools run are fixed names (nvidia-smi, dmesg, journalctl), never input
import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the node's Python may be 3.8: these shapes are for the type checker only
    from typing import TypedDict

    class Finding(TypedDict):
        check: str
        status: str  # PASS, FAIL, WARN or SKIP
        detail: str

    class HealthReport(TypedDict):
        findings: list[Finding]
        kernel_cursor: str
        healthy: bool


PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"
TOOL_TIMEOUT = 10  # seconds per nvidia-smi / dmesg call: a node that answers slower than this is not healthy
NVIDIA_SMI = "nvidia-smi"
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
CARDS_QUERY = (
    "index,uuid,pci.bus_id,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,"
    "retired_pages.pending"
)
REMAP_QUERY = (
    "gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure"
)
# Drivers since R535 name them clocks_event_reasons; older ones only clocks_throttle_reasons.
THROTTLE_FIELDS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
THROTTLE_PREFIXES = ("clocks_event_reasons", "clocks_throttle_reasons")
THROTTLE_FAIL = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
# XIDs a tenant's own program causes (a bad kernel, an MMU fault, a stopped channel): shown, not the node's fault.
APPLICATION_XIDS = {13, 31, 43, 45, 68, 69}
# The NVIDIA driver's own record, read whole: the message itself starts with "NVRM: Xid" (after dmesg's stamp, or
# the journal's "<host> kernel: "). Text that merely contains it is never an XID: a tenant's program can put any
# text in a kernel line of its own (a trap line quotes the faulting file's name), never at the message's start
# (issue 39: "traps: ... in x NVRM: Xid (PCI:...): 79, ..." made a node degraded and credited time).
XID_LINE = re.compile(r"^\s*\[\s*\d+(?:\.\d+)?\]\s(?:\S+ kernel: )?NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+),\s*(.*)$")
# The check's name when the XIDs come from the kernel log (no watcher log on the node): its text is not proof.
KERNEL_XID = "xid_kernel_log"
STAMP = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]")
SPEED = re.compile(r"(\d+(?:\.\d+)?)\s*GB/s", re.IGNORECASE)
GPU_LINE = re.compile(r"^GPU (\d+):")
LINK_LINE = re.compile(r"^\s*Link (\d+):\s*(.+?)\s*$")


def finding(check: str, status: str, detail: str) -> Finding:
    return {"check": check, "status": status, "detail": detail[:500]}


def run_tool(argv: list[str]) -> tuple[int | None, str]:
    """(exit status, stdout + stderr); None when the tool is missing or did not answer in time."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=TOOL_TIMEOUT)
    except FileNotFoundError:
        return None, f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(argv)}` did not answer within {TOOL_TIMEOUT} s"
    except OSError as exc:
        return None, f"{argv[0]}: {exc}"
    out = done.stdout.decode(errors="replace")
    if done.returncode != 0:
        out = (out + " " + done.stderr.decode(errors="replace")).strip()
    return done.returncode, out


def said(text: str) -> str:
    return " ".join(text.split())[:200] or "no message"


def csv_rows(text: str, width: int) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if line.strip():
            cells = [cell.strip() for cell in line.split(",")]
            if len(cells) == width:
                rows.append(cells)
    return rows


def count(cell: str) -> int | None:
    """A counter nvidia-smi printed; None for [N/A], [Not Supported] and the like."""
    try:
        return int(cell)
    except ValueError:
        return None


def yes(cell: str) -> bool:
    return cell.strip().lower() in ("yes", "1", "true", "active")


# --- the cards, their ECC counters and retired pages (one nvidia-smi call) ---------------------------------------


def evaluate_cards(text: str, expected: int) -> tuple[list[Finding], list[list[str]]]:
    rows = csv_rows(text, len(CARDS_QUERY.split(",")))
    findings = []
    if expected and len(rows) != expected:
        findings.append(finding("cards", FAIL, f"{len(rows)} of {expected} cards listed by nvidia-smi"))
    else:
        findings.append(finding("cards", PASS, f"{len(rows)} cards listed"))
    ecc_fail = [f"GPU {r[0]}: {r[3]} uncorrectable ECC errors since the last reset" for r in rows if (count(r[3]) or 0)]
    ecc_old = [f"GPU {r[0]}: {r[4]} uncorrectable ECC errors over its life" for r in rows if (count(r[4]) or 0)]
    if ecc_fail:
        findings.append(finding("ecc", FAIL, "; ".join(ecc_fail)))
    elif ecc_old:
        findings.append(finding("ecc", WARN, "; ".join(ecc_old)))
    else:
        findings.append(finding("ecc", PASS, "no uncorrectable ECC error"))
    return findings, rows


def evaluate_memory_repair(rows: list[list[str]], remap_text: str | None) -> Finding:
    problems = [f"GPU {r[0]}: retired pages pending" for r in rows if yes(r[5])]
    index_of = {r[1]: r[0] for r in rows}
    for cells in csv_rows(remap_text or "", len(REMAP_QUERY.split(","))):
        card = index_of.get(cells[0], cells[0])
        if yes(cells[4]):
            problems.append(f"GPU {card}: row remapping failed")
        if yes(cells[3]):
            problems.append(f"GPU {card}: row remaps pending (needs a GPU reset)")
    if problems:
        return finding("memory_repair", FAIL, "; ".join(problems))
    if remap_text is None:
        return finding("memory_repair", PASS, "no retired page pending (no row remapping on these cards)")
    return finding("memory_repair", PASS, "no retired page pending, no pending or failed row remap")


# --- NVLink ------------------------------------------------------------------------------------------------------


def evaluate_nvlink(text: str) -> Finding:
    """`nvidia-smi nvlink --status`: a link is up only at a positive speed ("<inactive>", "Down", "0 GB/s" are not)."""
    card, links, down = "", 0, []
    for line in text.splitlines():
        gpu = GPU_LINE.match(line.strip())
        if gpu:
            card = gpu.group(1)
            continue
        link = LINK_LINE.match(line)
        if link and card:
            links += 1
            speed = SPEED.search(link.group(2))
            if speed is None or float(speed.group(1)) <= 0:
                down.append(f"GPU {card} link {link.group(1)}: {link.group(2)}")
    if not links:
        return finding("nvlink", SKIP, "nvidia-smi lists no NVLink on these cards")
    if down:
        shown = "; ".join(down[:6]) + (f" and {len(down) - 6} more" if len(down) > 6 else "")
        return finding("nvlink", FAIL, f"{len(down)} of {links} links down: {shown}")
    return finding("nvlink", PASS, f"{links} links up")


# --- throttling --------------------------------------------------------------------------------------------------


def evaluate_throttle(text: str) -> Finding:
    failing: list[str] = []  # a local annotation: never evaluated, so Python 3.8 runs it
    warning: list[str] = []
    for cells in csv_rows(text, 1 + len(THROTTLE_FIELDS)):
        for name, cell in zip(THROTTLE_FIELDS, cells[1:]):  # noqa: B905 - no strict= before Python 3.10
            if yes(cell):
                (failing if name in THROTTLE_FAIL else warning).append(f"GPU {cells[0]}: {name.replace('_', ' ')}")
    if failing:
        return finding("throttle", FAIL, "; ".join(failing + warning))
    if warning:
        return finding("throttle", WARN, "; ".join(warning))
    return finding("throttle", PASS, "no thermal or power slowdown")


# --- the kernel log: XID errors since the cursor -----------------------------------------------------------------


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown-boot"


def boot_time() -> float | None:
    """The boot's wall-clock start (epoch seconds), to turn an --since time into kernel-log seconds."""
    try:
        with open("/proc/stat") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def parse_cursor(cursor: str, boot: str) -> float | None:
    """The kernel-log second already read in this boot; None for another boot (or none): read from the start."""
    seen_boot, _, seconds = cursor.partition("@")
    if seen_boot != boot:
        return None
    try:
        return float(seconds)
    except ValueError:
        return None


def evaluate_xids(text: str, after: float | None) -> tuple[Finding, float | None]:
    """XID lines stamped after `after` (kernel-log seconds); the last stamp in the log (the next cursor)."""
    last: float | None = None
    hardware: list[str] = []
    application: list[str] = []
    for line in text.splitlines():
        stamp = STAMP.match(line)
        seconds = float(stamp.group(1)) if stamp else None
        if seconds is not None:
            last = seconds if last is None else max(last, seconds)
        xid = XID_LINE.match(line)
        if xid is None or (after is not None and (seconds is None or seconds <= after)):
            continue
        code = int(xid.group(2))
        text_ = f"XID {code} on {xid.group(1)}: {said(xid.group(3))[:120]}"
        (application if code in APPLICATION_XIDS else hardware).append(text_)
    return xid_finding(hardware, application, "no new XID error in the kernel log"), last


def xid_finding(hardware: list[str], application: list[str], none: str) -> Finding:
    """A hardware XID fails the node; one a tenant's own program causes is only shown."""
    if hardware:
        return finding("xid", FAIL, "; ".join((hardware + application)[:5]))
    if application:
        return finding("xid", WARN, "errors of the tenant's programs: " + "; ".join(application[:5]))
    return finding("xid", PASS, none)


XID_LOG = "/var/lib/b200-health/xid.jsonl"  # written by xid_watch.py (root), read here
XID_LOG_CURSOR = "xidlog@"


def root_only(path: str) -> str:
    """Why someone other than root could have written `path` ("" when only root could): the file and every folder
    above it root's, none writable by group or others, no link on the way."""
    current = "/"
    for part in [part for part in path.split("/") if part]:
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except OSError as exc:
            return f"{current}: {exc.strerror}"
        sticky = current != path and info.st_mode & 0o1000
        if os.path.islink(current) or info.st_uid != 0 or (info.st_mode & 0o022 and not sticky):
            return f"{current} is not root's alone"
    return ""


def evaluate_xid_events(lines: list[str], after: float | None) -> tuple[Finding, float | None]:
    """XID events of the NVML watcher logged after `after` (epoch seconds); the newest event's time."""
    last: float | None = None
    hardware: list[str] = []
    application: list[str] = []
    for line in lines:
        try:
            event = json.loads(line)
            at, code = float(event["at"]), int(event["xid"])
            card = str(event.get("uuid") or event.get("index", "?"))[:60]
        except (ValueError, KeyError, TypeError):
            continue
        last = at if last is None else max(last, at)
        if after is not None and at <= after:
            continue
        text_ = f"XID {code} on {card} (NVML)"
        (application if code in APPLICATION_XIDS else hardware).append(text_)
    return xid_finding(hardware, application, "no new XID event from NVML"), last


def check_xid_log(path: str, cursor: str, since: float | None) -> tuple[Finding, str] | None:
    """The watcher's log when it is there and only root writes it (None: fall back to the kernel log)."""
    if not os.path.exists(path) or root_only(path):
        return None
    lines: list[str] = []
    for name in (path + ".1", path):  # the watcher rotates its log once it is large
        try:
            with open(name, encoding="utf-8", errors="replace") as handle:
                lines += handle.read().splitlines()
        except OSError:
            continue
    after = since
    if cursor.startswith(XID_LOG_CURSOR):
        with contextlib.suppress(ValueError):
            after = float(cursor[len(XID_LOG_CURSOR) :])
    result, last = evaluate_xid_events(lines, after)
    known = [x for x in (last, after) if x is not None]
    # The event's own time, whole (repr): a rounded cursor would read the newest event again as new
    return result, (f"{XID_LOG_CURSOR}{max(known)!r}" if known else cursor)


def kernel_log() -> tuple[str | None, str]:
    """The kernel log with monotonic stamps: dmesg, else the journal; (None, why) when this login may read neither."""
    tried = []
    for argv in (["dmesg"], ["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager", "-q"]):
        status, out = run_tool(argv)
        if status == 0:
            return out, argv[0]
        tried.append(f"{argv[0]}: {said(out)[:120]}")
    return None, "; ".join(tried)


def check_xids(cursor: str, since: float | None, xid_log: str = XID_LOG) -> tuple[Finding, str]:
    from_watcher = check_xid_log(xid_log, cursor, since)
    if from_watcher is not None:
        return from_watcher
    boot = boot_id()
    text, source = kernel_log()
    if text is None:
        detail = f"kernel log unreadable for this login, XID errors not checked ({source})"
        return finding(KERNEL_XID, WARN, detail), cursor
    after = parse_cursor(cursor, boot)
    if after is None and since is not None:
        started = boot_time()
        after = since - started if started is not None and since > started else None
    result, last = evaluate_xids(text, after)
    result = {**result, "check": KERNEL_XID}
    known = [x for x in (last, after) if x is not None]
    newest = max(known) if known else None
    return result, (f"{boot}@{newest:.6f}" if newest is not None else cursor)


# --- disk space --------------------------------------------------------------------------------------------------


def check_disk(paths: list[str], min_free_percent: float) -> list[Finding]:
    """Free space on each folder's filesystem (statvfs: no file is read). Low space is the tenant's to act on: warn."""
    findings = []
    for path in paths:
        try:
            stat = os.statvfs(path)
        except OSError as exc:
            findings.append(finding("disk", SKIP, f"{path}: {exc.strerror or exc}"))
            continue
        total = stat.f_blocks * stat.f_frsize
        free = stat.f_bavail * stat.f_frsize
        percent = 100.0 * free / total if total else 0.0
        detail = f"{path}: {free / 2**30:.1f} GiB free ({percent:.0f} %)"
        findings.append(finding("disk", WARN if percent < min_free_percent else PASS, detail))
    return findings


# --- the whole probe ---------------------------------------------------------------------------------------------


def check_gpus(expected: int, required: bool) -> list[Finding]:
    status, out = run_tool([NVIDIA_SMI, f"--query-gpu={CARDS_QUERY}", "--format=csv,noheader,nounits"])
    if status is None and "not found" in out and not required:
        return [finding("cards", SKIP, "no nvidia-smi on this node (a CPU node): GPU checks skipped")]
    if status != 0:
        return [finding("cards", FAIL, f"nvidia-smi failed: {said(out)}")]
    findings, rows = evaluate_cards(out, expected)
    status, remap = run_tool([NVIDIA_SMI, f"--query-remapped-rows={REMAP_QUERY}", "--format=csv,noheader"])
    findings.append(evaluate_memory_repair(rows, remap if status == 0 else None))
    status, links = run_tool([NVIDIA_SMI, "nvlink", "--status"])
    findings.append(evaluate_nvlink(links) if status == 0 else finding("nvlink", WARN, f"not read: {said(links)}"))
    for prefix in THROTTLE_PREFIXES:
        fields = ",".join(f"{prefix}.{name}" for name in THROTTLE_FIELDS)
        status, throttle = run_tool([NVIDIA_SMI, f"--query-gpu=index,{fields}", "--format=csv,noheader"])
        if status == 0:
            findings.append(evaluate_throttle(throttle))
            break
    else:
        findings.append(finding("throttle", WARN, f"not read: {said(throttle)}"))
    return findings


def probe(args: argparse.Namespace) -> HealthReport:
    findings = check_gpus(args.expect_gpus, args.require_gpus)
    xid, cursor = check_xids(args.kernel_cursor, args.since, args.xid_log)
    findings.append(xid)
    findings.extend(check_disk(args.path, args.min_free_percent))
    return {
        "findings": findings,
        "kernel_cursor": cursor,
        "healthy": not any(item["status"] == FAIL for item in findings),
    }


def parser() -> argparse.ArgumentParser:
    tool = argparse.ArgumentParser(description="Health of a rented GPU node, without loading its cards.")
    tool.add_argument("--expect-gpus", type=int, default=0, help="cards nvidia-smi must list (0: any)")
    tool.add_argument("--require-gpus", action="store_true", help="a node without nvidia-smi fails")
    tool.add_argument("--kernel-cursor", default="", help="BOOT_ID@SECONDS the kernel log was read up to")
    tool.add_argument("--since", type=float, help="epoch seconds: with no cursor, XIDs before this are old")
    tool.add_argument("--xid-log", default=XID_LOG, help="the NVML XID event log xid_watch.py writes")
    tool.add_argument("--path", action="append", default=[], help="a folder whose free space is checked")
    tool.add_argument("--min-free-percent", type=float, default=5.0)
    return tool


def search_sbin() -> None:
    """A login that is not root often has no sbin folder on its PATH (sshd's default for users): the tools may be
    there. They are looked for after the login's own folders, never before."""
    folders = [folder for folder in os.environ.get("PATH", "").split(os.pathsep) if folder]
    os.environ["PATH"] = os.pathsep.join(folders + [folder for folder in SBIN if folder not in folders])


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    search_sbin()
    try:
        report = probe(args)
    except Exception as exc:  # the shop reads one JSON object whatever happens
        report = {
            "findings": [finding("probe", WARN, f"the health tool broke: {type(exc).__name__}: {exc}")],
            "kernel_cursor": args.kernel_cursor,
            "healthy": True,  # our tool's fault, not the node's: staff see the warning
        }
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

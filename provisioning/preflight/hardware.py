"""Hardware gates from the node's own tools: NVSwitch fabric, ECC and row remaps, NVLink, idle cards, DCGM.

Each runs when its tool exists (nvidia-smi, dcgmi) and otherwise reports `skip` with the reason; on the cpu
rehearsal they all skip. The parsers are pure functions over the tools' text, tested on recorded output.
Thresholds are data (profile `thresholds`). The gates look at every card nvidia-smi lists: a node is one lot
of two cards, rented whole. A tool that exits non-zero, or prints a line the parser does not expect, is a
failed gate that quotes the tool; nothing here raises past its gate.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from typing import Any

# FAIL and SKIP are re-exported: the shop's node checks (provisioning.node_checks) read them from here.
from provisioning.preflight.report import FAIL as FAIL
from provisioning.preflight.report import PASS, WARN, Result, worst
from provisioning.preflight.report import SKIP as SKIP

NVIDIA_SMI = "nvidia-smi"
DCGMI = "dcgmi"
KILL_GRACE_S = 5.0  # a tool stuck in the driver may not even die on SIGKILL: stop waiting for it after this
MESSAGE_CHARS = 400
MALFORMED_FIX = "run `nvidia-smi -q` and check dmesg for Xid errors: a card nvidia-smi cannot read is not handed over"


class ToolError(RuntimeError):
    pass


class ToolTimeout(ToolError):
    pass


def run_tool(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a tool under a timeout, whatever its exit status; ToolError when it cannot start or does not answer."""
    command = " ".join(argv)
    try:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # noqa: S603
    except OSError as exc:
        raise ToolError(f"`{command}` could not start: {exc}") from exc
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=KILL_GRACE_S)
        raise ToolTimeout(f"`{command}` did not answer within {timeout:g} s") from exc
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def own_message(completed: subprocess.CompletedProcess[str]) -> str:
    """What the tool said: nvidia-smi and dcgmi print their errors on stdout, most tools on stderr."""
    lines = [line.strip() for line in f"{completed.stdout}\n{completed.stderr}".splitlines() if line.strip()]
    return " ".join(lines)[:MESSAGE_CHARS] or "no message"


def tool(argv: list[str], timeout: float = 60) -> str:
    """The tool's stdout; ToolError with the tool's own message when it exits non-zero, fails to start or hangs."""
    completed = run_tool(argv, timeout)
    if completed.returncode != 0:
        raise ToolError(f"`{' '.join(argv)}` exited {completed.returncode}: {own_message(completed)}")
    return completed.stdout


def csv_table(text: str, fields: str) -> tuple[list[list[str]], list[str]]:
    """The rows of a `--format=csv,noheader` answer that have one cell per field, and the lines that have not."""
    width = len(fields.split(","))
    rows, malformed = [], []
    for line in text.splitlines():
        if line.strip():
            cells = [cell.strip() for cell in line.split(",")]
            if len(cells) == width:
                rows.append(cells)
            else:
                malformed.append(line.strip())
    return rows, malformed


def malformed_lines(lines: list[str], fields: str) -> str:
    more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
    return f"nvidia-smi printed a line that is not `{fields}`: {lines[0]!r}{more}"


def number(cell: str) -> int | None:
    """nvidia-smi's "[N/A]", "N/A" or "[Not Supported]" read as None."""
    try:
        return int(float(cell))
    except ValueError:
        return None


def missing(name: str, device: str, what: str) -> Result | None:
    if device != "cuda":
        return Result(name, SKIP, "cpu rehearsal: hardware gates apply with --device cuda")
    if shutil.which(what) is None:
        return Result(name, SKIP, f"{what} not found on PATH")
    return None


# --- the node's cards: what nvidia-smi lists, known before any gate runs ---------------------------------------

CARD_QUERY = "index,name,uuid,compute_cap"  # compute_cap needs a 510+ driver
CARD_KEYS = ("index", "name", "uuid", "compute_capability")


def node_cards(device: str) -> tuple[list[dict[str, str]] | None, str]:
    """Every card nvidia-smi lists, and what went wrong listing them ("" when nothing did).

    None when nvidia-smi cannot be asked (cpu rehearsal, not on PATH); [] with its own message when it failed.
    """
    skipped = missing("node_gpus", device, NVIDIA_SMI)
    if skipped:
        return None, skipped.detail
    try:
        text = tool([NVIDIA_SMI, f"--query-gpu={CARD_QUERY}", "--format=csv,noheader"])
    except ToolError as exc:
        return [], str(exc)
    rows, malformed = csv_table(text, CARD_QUERY)
    cards = [dict(zip(CARD_KEYS, row, strict=True)) for row in rows]
    return cards, malformed_lines(malformed, CARD_QUERY) if malformed else ""


def driver_version(device: str) -> str | None:
    """The NVIDIA driver's version; None on cpu or when nvidia-smi cannot say (the gates report why)."""
    if missing("driver", device, NVIDIA_SMI):
        return None
    try:
        text = tool([NVIDIA_SMI, "--query-gpu=driver_version", "--format=csv,noheader"], timeout=20)
    except ToolError:
        return None
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


def evaluate_card_count(
    visible: int, world_size: int, listed: list[dict[str, str]] | None, note: str, cuda_visible: str | None
) -> Result | None:
    """`arch` fails when fewer cards are visible than --world-size asks for, saying what nvidia-smi lists."""
    if visible >= world_size:
        return None
    if listed:
        seen = f"nvidia-smi lists {len(listed)}: " + ", ".join(
            f"GPU {card['index']} {card['name']} {card['uuid']}" for card in listed
        )
    else:
        seen = f"nvidia-smi lists none: {note}" if note else "nvidia-smi lists none"
    if cuda_visible is not None:
        seen += f"; CUDA_VISIBLE_DEVICES={cuda_visible!r} limits what CUDA sees"
    return Result(
        "arch",
        FAIL,
        f"arch failed: {visible} of {world_size} cards visible ({seen}): check that every card is seated and"
        " powered and that the driver is loaded (nvidia-smi; dmesg for Xid or NVRM errors), then rerun",
        {"visible_cards": visible, "world_size": world_size},
    )


# --- fabric: the NVSwitch fabric is trained; until it is, CUDA blocks or fails in cuInit on an HGX board ---------

FABRIC_QUERY = "index,fabric.state,fabric.status"
NO_FABRIC = {"n/a", "[n/a]", "not supported", "[not supported]"}  # PCIe cards, single-GPU VMs
FABRIC_FIX = (
    "the NVSwitch fabric is not ready and CUDA cannot start until it is: start nvidia-fabricmanager"
    " (systemctl start nvidia-fabricmanager), check `systemctl status nvidia-fabricmanager` and"
    " /var/log/fabricmanager.log, then reset the cards (nvidia-smi -r) or reboot"
)
GPU_SECTION = re.compile(r"^GPU (\S+)\s*$")


def parse_fabric_q(text: str) -> list[dict[str, str]]:
    """The Fabric section of every card in `nvidia-smi -q` (for drivers whose --query-gpu has no fabric field)."""
    cards: list[dict[str, str]] = []
    fabric_indent = None  # set while inside a card's Fabric section
    for line in text.splitlines():
        section = GPU_SECTION.match(line)
        if section:
            cards.append({"index": str(len(cards)), "bus_id": section.group(1)})
            fabric_indent = None
            continue
        indent, stripped = len(line) - len(line.lstrip()), line.strip()
        if not cards or not stripped:
            continue
        if stripped == "Fabric":
            fabric_indent = indent
        elif fabric_indent is not None and indent <= fabric_indent:
            fabric_indent = None
        elif fabric_indent is not None and ":" in stripped:
            key, _, value = stripped.partition(":")
            if key.strip() in ("State", "Status"):
                cards[-1].setdefault(key.strip().lower(), value.strip())
    return [{"state": "N/A", "status": "N/A", **card} for card in cards]


def fabric_states() -> tuple[list[dict[str, str]], list[str]]:
    """Each card's fabric state and status, and the lines that could not be read; ToolError when nvidia-smi fails."""
    try:
        text = tool([NVIDIA_SMI, f"--query-gpu={FABRIC_QUERY}", "--format=csv,noheader"])
    except ToolError as exc:
        if "not a valid field" not in str(exc):
            raise
        return parse_fabric_q(tool([NVIDIA_SMI, "-q"])), []
    rows, malformed = csv_table(text, FABRIC_QUERY)
    return [dict(zip(("index", "state", "status"), row, strict=True)) for row in rows], malformed


def fabric_problem(card: dict[str, str]) -> str:
    status = card["status"]
    shown = "" if status.lower() in NO_FABRIC or status == card["state"] else f", status {status}"
    return f"GPU {card['index']}: fabric {card['state']}{shown}"


def evaluate_fabric(cards: list[dict[str, str]], malformed: list[str]) -> Result:
    metrics = {"cards": cards}
    if malformed:
        return Result("fabric", FAIL, f"fabric failed: {malformed_lines(malformed, FABRIC_QUERY)}: {MALFORMED_FIX}")
    if not cards:
        return Result("fabric", FAIL, "fabric failed: nvidia-smi listed no GPU: check the driver (nvidia-smi)")
    ready = [card for card in cards if card["state"] == "Completed" and card["status"] == "Success"]
    without = [card for card in cards if card["state"].lower() in NO_FABRIC]
    problems = [card for card in cards if card not in ready and card not in without]
    if problems:
        listed = "; ".join(fabric_problem(card) for card in problems)
        return Result("fabric", FAIL, f"fabric failed: {listed}: {FABRIC_FIX}", metrics)
    if not ready:
        return Result(
            "fabric",
            SKIP,
            f"no NVSwitch fabric on these cards (fabric state {cards[0]['state']}: PCIe cards or a single-GPU VM)",
            metrics,
        )
    others = f"; {len(without)} without a fabric" if without else ""
    return Result("fabric", PASS, f"{len(ready)} cards: NVSwitch fabric Completed, status Success{others}", metrics)


def fabric(device: str) -> Result:
    skipped = missing("fabric", device, NVIDIA_SMI)
    if skipped:
        return skipped
    try:
        cards, malformed = fabric_states()
    except ToolError as exc:
        return Result("fabric", FAIL, f"fabric failed: {exc}: check the driver (nvidia-smi, dmesg)")
    return evaluate_fabric(cards, malformed)


# --- gpu_health: ECC counters and row remapping -------------------------------------------------------------

ECC_QUERY = "index,uuid,ecc.mode.current,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total"
REMAP_QUERY = (
    "gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure"
)


def evaluate_health(ecc_csv: str, remap_csv: str, thresholds: dict[str, Any]) -> Result:
    ecc_rows, malformed = csv_table(ecc_csv, ECC_QUERY)
    remap_rows, malformed_remaps = csv_table(remap_csv, REMAP_QUERY)
    problems: list[tuple[str, str]] = [
        (FAIL, f"{malformed_lines(lines, query)}: {MALFORMED_FIX}")
        for lines, query in ((malformed, ECC_QUERY), (malformed_remaps, REMAP_QUERY))
        if lines
    ]
    cards = []
    index_of = {}
    for index, uuid, mode, volatile, aggregate in ecc_rows:
        index_of[uuid] = index
        card = {"index": index, "uuid": uuid, "ecc_mode": mode, "uncorrected_volatile": number(volatile)}
        card["uncorrected_aggregate"] = number(aggregate)
        cards.append(card)
        if mode.lower() != "enabled":
            problems.append((WARN, f"GPU {index}: ECC is {mode}: enable it (nvidia-smi -e 1) and reboot"))
        limit = thresholds.get("ecc_uncorrected_volatile_max")
        if limit is not None and (number(volatile) or 0) > limit:
            problems.append(
                (
                    FAIL,
                    f"GPU {index}: {volatile} uncorrected ECC errors since the last reset: drain the node,"
                    " run dcgmi diag -r 3 and replace the card if they recur",
                )
            )
        limit = thresholds.get("ecc_uncorrected_aggregate_max")
        if limit is not None and (number(aggregate) or 0) > limit:
            problems.append((WARN, f"GPU {index}: {aggregate} uncorrected ECC errors over its life"))
    for uuid, correctable, uncorrectable, pending, failure in remap_rows:
        index = index_of.get(uuid, uuid)
        for card in cards:
            if card["uuid"] == uuid:
                card.update(remapped_correctable=number(correctable), remapped_uncorrectable=number(uncorrectable))
                card.update(remap_pending=pending, remap_failure=failure)
        if failure.lower() in ("yes", "1", "true"):
            problems.append((FAIL, f"GPU {index}: row remapping failed: the card must be replaced (RMA)"))
        if pending.lower() in ("yes", "1", "true"):
            problems.append((FAIL, f"GPU {index}: row remaps are pending: reset the GPU (nvidia-smi -r) or reboot"))
        limit = thresholds.get("remapped_rows_uncorrectable_max")
        if limit is not None and (number(uncorrectable) or 0) > limit:
            problems.append((WARN, f"GPU {index}: {uncorrectable} rows remapped for uncorrectable errors"))
    if not cards:
        problems.append((FAIL, "nvidia-smi listed no GPU: check the driver (nvidia-smi)"))
    status = worst([level for level, _ in problems]) if problems else PASS
    shown = [text for level, text in problems if level == status]
    if status == PASS:
        return Result(
            "gpu_health", PASS, f"{len(cards)} cards: ECC on, no uncorrected errors, no pending remap", {"cards": cards}
        )
    verb = "failed" if status == FAIL else "warns"
    return Result("gpu_health", status, f"gpu_health {verb}: " + "; ".join(shown), {"cards": cards})


def gpu_health(device: str, thresholds: dict[str, Any]) -> Result:
    skipped = missing("gpu_health", device, NVIDIA_SMI)
    if skipped:
        return skipped
    try:
        ecc = tool([NVIDIA_SMI, f"--query-gpu={ECC_QUERY}", "--format=csv,noheader,nounits"])
        try:
            remap = tool([NVIDIA_SMI, f"--query-remapped-rows={REMAP_QUERY}", "--format=csv,noheader"])
        except ToolError:
            remap = ""  # cards before Ampere have no row remapping
    except ToolError as exc:
        return Result("gpu_health", FAIL, f"gpu_health failed: {exc}: check the driver (nvidia-smi, dmesg)", {})
    return evaluate_health(ecc, remap, thresholds)


# --- nvlink: every card's links up ----------------------------------------------------------------------------

GPU_LINE = re.compile(r"^GPU (\d+):\s*(.*?)(?:\s*\(UUID:\s*([^)]+)\))?\s*$")
LINK_LINE = re.compile(r"^\s*Link (\d+):\s*(.+?)\s*$")
SPEED = re.compile(r"(\d+(?:\.\d+)?)\s*GB/s", re.IGNORECASE)


def link_active(state: str) -> bool:
    """Up only at a positive speed: "<inactive>", "Down", "0 GB/s" and "Not Supported" are not."""
    speed = SPEED.search(state)
    return speed is not None and float(speed.group(1)) > 0


def parse_nvlink(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi nvlink --status`: per GPU, its links and how many are active (at a positive speed)."""
    cards: list[dict[str, Any]] = []
    for line in text.splitlines():
        gpu = GPU_LINE.match(line.strip())
        if gpu:
            cards.append({"index": int(gpu.group(1)), "name": gpu.group(2), "uuid": gpu.group(3), "links": {}})
            continue
        link = LINK_LINE.match(line)
        if link and cards:
            cards[-1]["links"][int(link.group(1))] = link.group(2)
    for card in cards:
        card["active"] = sum(1 for state in card["links"].values() if link_active(state))
    return cards


def evaluate_nvlink(text: str, thresholds: dict[str, Any]) -> Result:
    cards = parse_nvlink(text)
    wanted = thresholds.get("nvlink_min_active_links")
    metrics = {"cards": [{key: card[key] for key in ("index", "uuid", "active")} for card in cards]}
    if not cards:
        return Result("nvlink", FAIL, "nvlink failed: nvidia-smi reported no NVLink: check the fabric manager", metrics)
    short = [card for card in cards if wanted is not None and card["active"] < wanted]
    if short:
        listed = ", ".join(f"GPU {card['index']} has {card['active']} active links" for card in short)
        return Result(
            "nvlink",
            FAIL,
            f"nvlink failed: {listed}, {wanted} wanted: check `nvidia-smi nvlink --status`, the NVLink cabling"
            " and nvidia-fabricmanager, then reset the cards",
            metrics,
        )
    return Result("nvlink", PASS, f"{len(cards)} cards, every one with >= {wanted} active links", metrics)


def nvlink(device: str, thresholds: dict[str, Any], world_size: int | None = None) -> Result:
    skipped = missing("nvlink", device, NVIDIA_SMI)
    if skipped:
        return skipped
    if world_size == 1:
        # A single-GPU VM shows its links inactive: that is no fault when no second card is used.
        return Result("nvlink", SKIP, "one card (--world-size 1): NVLink carries nothing between cards here")
    try:
        text = tool([NVIDIA_SMI, "nvlink", "--status"])
    except ToolError as exc:
        return Result("nvlink", FAIL, f"nvlink failed: {exc}", {})
    return evaluate_nvlink(text, thresholds)


# --- idle_cards: nothing runs on the cards before the preflight, nothing is left after ------------------------


MEMORY_QUERY = "index,uuid,memory.used"
APPS_QUERY = "gpu_uuid,pid,process_name,used_memory"


def evaluate_idle(
    memory_csv: str, apps_csv: str, thresholds: dict[str, Any], phase: str
) -> tuple[str, str, dict[str, Any]]:
    limit = thresholds.get("idle_max_mib")
    memory_rows, malformed = csv_table(memory_csv, MEMORY_QUERY)
    app_rows, malformed_apps = csv_table(apps_csv, APPS_QUERY)
    for lines, query in ((malformed, MEMORY_QUERY), (malformed_apps, APPS_QUERY)):
        if lines:
            return FAIL, f"{phase}: {malformed_lines(lines, query)}: {MALFORMED_FIX}", {}
    cards = [{"index": index, "uuid": uuid, "used_mib": number(used)} for index, uuid, used in memory_rows]
    apps = [{"uuid": uuid, "pid": pid, "name": name, "used_mib": number(used)} for uuid, pid, name, used in app_rows]
    busy = []
    for card in cards:
        held = [app for app in apps if app["uuid"] == card["uuid"]]
        if held or (limit is not None and (card["used_mib"] or 0) > limit):
            who = ", ".join(f"pid {app['pid']} {app['name']} ({app['used_mib']} MiB)" for app in held)
            busy.append(f"GPU {card['index']} uses {card['used_mib']} MiB" + (f" held by {who}" if who else ""))
    metrics = {"cards": cards, "processes": apps}
    if busy:
        fix = (
            "the node is not free: stop those processes or drain the node"
            if phase == "before"
            else "the preflight left work on the cards: find and stop it before hand-over"
        )
        return FAIL, f"{phase}: " + "; ".join(busy) + f": {fix}", metrics
    return PASS, f"{phase}: {len(cards)} cards idle (<= {limit} MiB, no process)", metrics


def idle_snapshot(device: str, thresholds: dict[str, Any], phase: str) -> tuple[str, str, dict[str, Any]]:
    skipped = missing("idle_cards", device, NVIDIA_SMI)
    if skipped:
        return skipped.status, skipped.detail, {}
    try:
        used = tool([NVIDIA_SMI, f"--query-gpu={MEMORY_QUERY}", "--format=csv,noheader,nounits"])
        apps = tool([NVIDIA_SMI, f"--query-compute-apps={APPS_QUERY}", "--format=csv,noheader,nounits"])
    except ToolError as exc:
        return FAIL, f"{phase}: {exc}", {}
    return evaluate_idle(used, apps, thresholds, phase)


def idle_cards(before: tuple[str, str, dict[str, Any]], after: tuple[str, str, dict[str, Any]]) -> Result:
    status = worst([before[0], after[0]])
    if status == SKIP:
        return Result("idle_cards", SKIP, before[1], {})
    verb = {FAIL: "idle_cards failed: ", WARN: "idle_cards warns: "}.get(status, "")
    detail = verb + "; ".join(part[1] for part in (before, after) if part[0] == status or status == PASS)
    return Result("idle_cards", status, detail, {"before": before[2], "after": after[2]})


# --- dcgm_diag: `dcgmi diag -r 2 --json` --------------------------------------------------------------------


def dcgm_findings(tree: Any, test: str = "", gpu: str = "") -> list[tuple[str, str, str, str]]:
    """(status, test, gpu, info) for every result in a DCGM diag JSON, tolerant of its 3.x and 4.x layouts."""
    found: list[tuple[str, str, str, str]] = []
    if isinstance(tree, dict):
        test = str(tree.get("name") or tree.get("test_name") or test)
        for key in ("gpu_id", "gpu_ids", "entity_id"):
            if key in tree:
                gpu = str(tree[key])
        status = tree.get("status")
        if isinstance(status, str):
            info = tree.get("warnings") or tree.get("info") or tree.get("error") or ""
            if isinstance(info, list):
                info = "; ".join(str(item.get("warning", item) if isinstance(item, dict) else item) for item in info)
            found.append((status.lower(), test, gpu, str(info)))
        for key, value in tree.items():
            if isinstance(value, dict | list) and key not in ("warnings", "info"):
                found.extend(dcgm_findings(value, test, gpu))
    elif isinstance(tree, list):
        for item in tree:
            found.extend(dcgm_findings(item, test, gpu))
    return found


def dcgm_fix(level: int) -> str:
    return (
        f"is nv-hostengine running (systemctl status nvidia-dcgm)? Rerun `dcgmi diag -r {level}` by hand and read"
        " /var/log/nv-hostengine.log"
    )


def dcgmi_error(text: str) -> str:
    """dcgmi prints its own errors on stdout, as "Error: ..." lines, even with --json; "" when there is none."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip().startswith("Error"))


def evaluate_dcgm(text: str, level: int) -> Result:
    error = dcgmi_error(text)
    if error:
        return Result("dcgm_diag", FAIL, f"dcgm_diag failed: dcgmi diag -r {level}: {error}: {dcgm_fix(level)}", {})
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        said = " ".join(text.split())[:MESSAGE_CHARS] or "nothing"
        return Result(
            "dcgm_diag", FAIL, f"dcgm_diag failed: dcgmi diag -r {level} printed no JSON ({said}): {dcgm_fix(level)}"
        )
    # DCGM puts a top-level runtime_error in its JSON when the diagnostic could not run at all.
    if isinstance(data, dict) and data.get("runtime_error"):
        return Result(
            "dcgm_diag",
            FAIL,
            f"dcgm_diag failed: dcgmi diag -r {level} could not run: {data['runtime_error']}: {dcgm_fix(level)}",
            {"level": level},
        )
    findings = dcgm_findings(data)
    failures = [item for item in findings if item[0] == "fail"]
    warnings = [item for item in findings if item[0] == "warn"]
    metrics = {"level": level, "results": len(findings), "failures": len(failures), "warnings": len(warnings)}

    def describe(items: list[tuple[str, str, str, str]]) -> str:
        return "; ".join(f"{test} on GPU {gpu or '?'}" + (f" ({info})" if info else "") for _, test, gpu, info in items)

    if failures:
        return Result(
            "dcgm_diag",
            FAIL,
            f"dcgm_diag failed: dcgmi diag -r {level}: {describe(failures[:5])}: take the card out of service",
            metrics,
        )
    if not findings:
        return Result("dcgm_diag", FAIL, f"dcgm_diag failed: dcgmi diag -r {level} reported no test result", metrics)
    if warnings:
        return Result("dcgm_diag", WARN, f"dcgm_diag warns: {describe(warnings[:5])}", metrics)
    return Result("dcgm_diag", PASS, f"dcgmi diag -r {level}: {len(findings)} results, none failed", metrics)


def dcgm_diag(device: str, level: int, timeout_s: float) -> Result:
    skipped = missing("dcgm_diag", device, DCGMI)
    if skipped:
        return skipped
    try:
        completed = run_tool([DCGMI, "diag", "-r", str(level), "--json"], timeout=timeout_s)
    except ToolError as exc:
        return Result("dcgm_diag", FAIL, f"dcgm_diag failed: {exc}: {dcgm_fix(level)}", {})
    # dcgmi exits non-zero when a test fails, and its JSON says which: read what it printed either way.
    return evaluate_dcgm(completed.stdout if completed.stdout.strip() else completed.stderr, level)

"""Hardware gates from the node's own tools: ECC and row remaps, NVLink, idle cards, DCGM diagnostics.

Each runs when its tool exists (nvidia-smi, dcgmi) and otherwise reports `skip` with the reason; on the cpu
rehearsal they all skip. The parsers are pure functions over the tools' text, tested on recorded output.
Thresholds are data (profile `thresholds`). The gates look at every card nvidia-smi lists: a node is one lot
of two cards, rented whole.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

from provisioning.preflight.report import FAIL, PASS, SKIP, WARN, Result, worst

NVIDIA_SMI = "nvidia-smi"
DCGMI = "dcgmi"


class ToolError(RuntimeError):
    pass


def tool(argv: list[str], timeout: float = 60) -> str:
    """The tool's stdout; ToolError when it fails or times out."""
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"`{' '.join(argv)}` did not answer within {timeout:g} s") from exc
    except OSError as exc:
        raise ToolError(f"`{' '.join(argv)}` could not start: {exc}") from exc
    if completed.returncode != 0 and not completed.stdout.strip():
        message = (completed.stderr or completed.stdout).strip().splitlines()
        raise ToolError(f"`{' '.join(argv)}` exited {completed.returncode}: {message[-1] if message else ''}")
    return completed.stdout


def csv_rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if line.strip()]


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


# --- gpu_health: ECC counters and row remapping -------------------------------------------------------------

ECC_QUERY = "index,uuid,ecc.mode.current,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total"
REMAP_QUERY = (
    "gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure"
)


def evaluate_health(ecc_csv: str, remap_csv: str, thresholds: dict[str, Any]) -> Result:
    problems: list[tuple[str, str]] = []
    cards = []
    index_of = {}
    for row in csv_rows(ecc_csv):
        if len(row) < 5:
            continue
        index, uuid, mode, volatile, aggregate = row[:5]
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
    for row in csv_rows(remap_csv):
        if len(row) < 5:
            continue
        uuid, correctable, uncorrectable, pending, failure = row[:5]
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
        return Result("gpu_health", FAIL, "gpu_health: nvidia-smi listed no GPU: check the driver (nvidia-smi)", {})
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
        return Result("gpu_health", FAIL, f"gpu_health failed: {exc}: check the driver", {})
    return evaluate_health(ecc, remap, thresholds)


# --- nvlink: every card's links up ----------------------------------------------------------------------------

GPU_LINE = re.compile(r"^GPU (\d+):\s*(.*?)(?:\s*\(UUID:\s*([^)]+)\))?\s*$")
LINK_LINE = re.compile(r"^\s*Link (\d+):\s*(.+?)\s*$")


def parse_nvlink(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi nvlink --status`: per GPU, its links and which are active ("<inactive>" when down)."""
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
        card["active"] = sum(1 for state in card["links"].values() if "inactive" not in state.lower())
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


def nvlink(device: str, thresholds: dict[str, Any]) -> Result:
    skipped = missing("nvlink", device, NVIDIA_SMI)
    if skipped:
        return skipped
    try:
        text = tool([NVIDIA_SMI, "nvlink", "--status"])
    except ToolError as exc:
        return Result("nvlink", FAIL, f"nvlink failed: {exc}", {})
    return evaluate_nvlink(text, thresholds)


# --- idle_cards: nothing runs on the cards before the preflight, nothing is left after ------------------------


def evaluate_idle(memory_csv: str, apps_csv: str, thresholds: dict[str, Any], phase: str) -> tuple[str, str, dict]:
    limit = thresholds.get("idle_max_mib")
    cards = [{"index": row[0], "uuid": row[1], "used_mib": number(row[2])} for row in csv_rows(memory_csv)]
    apps = [
        {"uuid": row[0], "pid": row[1], "name": row[2], "used_mib": number(row[3])}
        for row in csv_rows(apps_csv)
        if len(row) >= 4
    ]
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


def idle_snapshot(device: str, thresholds: dict[str, Any], phase: str) -> tuple[str, str, dict]:
    skipped = missing("idle_cards", device, NVIDIA_SMI)
    if skipped:
        return skipped.status, skipped.detail, {}
    try:
        used = tool([NVIDIA_SMI, "--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"])
        apps = tool(
            [NVIDIA_SMI, "--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv,noheader,nounits"]
        )
    except ToolError as exc:
        return FAIL, f"{phase}: {exc}", {}
    return evaluate_idle(used, apps, thresholds, phase)


def idle_cards(before: tuple[str, str, dict], after: tuple[str, str, dict]) -> Result:
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


def evaluate_dcgm(text: str, level: int) -> Result:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return Result("dcgm_diag", FAIL, f"dcgm_diag failed: its JSON output is unreadable ({exc})", {})
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
        text = tool([DCGMI, "diag", "-r", str(level), "--json"], timeout=timeout_s)
    except ToolError as exc:
        return Result(
            "dcgm_diag", FAIL, f"dcgm_diag failed: {exc}: is nv-hostengine running (systemctl start nvidia-dcgm)?", {}
        )
    return evaluate_dcgm(text, level)

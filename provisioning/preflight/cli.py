"""The command line: validate, run the host checks and gates, launch the ranks, write the report.

Exit status: 0 when every check passed (or warned, or skipped), 1 when a check failed, 2 on a usage error
(bad arguments, a cpu world size larger than the CPU slots, an unreadable or invalid profile, a report path
that cannot be written). Past the usage errors a report is always written: a missing card, a tool's error,
CUDA that never initialises or an unexpected exception is a failed check in it, never a bare traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from provisioning.preflight import cards, facts, hardware, nccl_tests, split, versions
from provisioning.preflight.checks import stack
from provisioning.preflight.profile import ProfileError, Settings, read_profile, resolve
from provisioning.preflight.report import (
    ALL_CHECKS,
    CONTRACT_CHECKS,
    EXIT_USAGE,
    FAIL,
    SKIP,
    Result,
    build_report,
    exit_status,
    summary,
    write_report,
)

INJECTABLE = ("corrupt-checkpoint", "wrong-allreduce", "oom-in-forward", "exchange-fails")
ARCH = re.compile(r"^sm_\d{2,3}[af]?$")
RANK_CHECKS = tuple(name for name in CONTRACT_CHECKS if name != "stack")  # what the spawned ranks run
CANNOT_RUN = "the stack cannot run on this device"


class UsageError(Exception):
    pass


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m provisioning.preflight",
        description="Prove on a GPU node that the delivered PyTorch stack runs on its cards, and keep the evidence.",
        epilog="Exit status: 0 ok, 1 a check failed, 2 usage error.",
    )
    parser.add_argument("--device", required=True, choices=("cuda", "cpu"), help="cuda on the node; cpu rehearses")
    parser.add_argument("--world-size", required=True, type=int, help="processes, one per card")
    parser.add_argument("--json", required=True, type=Path, help="where to write the JSON report")
    parser.add_argument("--expect-arch", help="every card must be this architecture, e.g. sm_100 for B200")
    parser.add_argument("--order", help="the order reference the report belongs to")
    parser.add_argument("--profile", type=Path, help="a preflight profile (JSON); built-in defaults otherwise")
    parser.add_argument("--timeout", type=float, help="hard limit in seconds for the ranks (default: the profile's)")
    parser.add_argument(
        "--cuda-init-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for a child process to report torch's versions and cards, which initialises CUDA"
        " (it blocks while an NVSwitch fabric is untrained); `stack` fails past it (default 120)",
    )
    parser.add_argument(
        "--inject",
        action="append",
        default=[],
        metavar="FAULT[:RANK]",
        help=(
            "TEST ONLY, never on a node being handed over: play a fault on one rank (default the last) to prove"
            f" the checks catch it: {', '.join(INJECTABLE)}. The report records it under injected_faults."
        ),
    )
    return parser


def command_line(
    *,
    python: str,
    device: str,
    world_size: int,
    report: str,
    order: str | None,
    profile: str,
    expect_arch: str | None,
) -> list[str]:
    """The command a preparation runs on the node, kept next to the parser it must satisfy (a recheck of a node
    between rentals has no order)."""
    argv = [python, "-m", "provisioning.preflight", "--device", device, "--world-size", str(world_size)]
    argv += ["--json", report, *(["--order", order] if order else []), "--profile", profile]
    return argv + (["--expect-arch", expect_arch] if expect_arch else [])


def validate(args: argparse.Namespace) -> dict[str, int]:
    if args.world_size < 1:
        raise UsageError(f"--world-size must be 1 or more, not {args.world_size}")
    if args.expect_arch is not None and not ARCH.match(args.expect_arch):
        raise UsageError(f"--expect-arch takes a name like sm_100, not {args.expect_arch!r}")
    if args.order is not None and not (0 < len(args.order) <= 64):
        raise UsageError("--order takes a reference of 1 to 64 characters")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.cuda_init_timeout <= 0:
        raise UsageError("--cuda-init-timeout must be a positive number of seconds")
    if args.device == "cpu" and args.world_size > cpu_slots():
        raise UsageError(f"--world-size {args.world_size} but {cpu_slots()} cpu cards are visible")
    injections: dict[str, int] = {}
    for item in args.inject:
        fault, _, rank_text = item.partition(":")
        if fault not in INJECTABLE:
            raise UsageError(f"--inject takes one of {', '.join(INJECTABLE)}, not {fault!r}")
        rank = args.world_size - 1
        if rank_text:
            if not rank_text.isdigit() or int(rank_text) >= args.world_size:
                raise UsageError(f"--inject {item}: the rank must be between 0 and {args.world_size - 1}")
            rank = int(rank_text)
        injections[fault] = rank
    try:
        args.json.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the folder for --json {args.json}: {exc.strerror or exc}") from exc
    if not os.access(args.json.parent, os.W_OK):
        raise UsageError(f"cannot write the report to {args.json}: the folder is not writable")
    return injections


def cpu_slots() -> int:
    """Ranks the cpu rehearsal may run: one per core, and always a pair."""
    return max(2, os.cpu_count() or 1)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)  # exits 2 on a malformed command line
    try:
        injections = validate(args)
        data, source, digest = read_profile(args.profile)
        settings = resolve(data, source=source, sha256=digest, device=args.device, world_size=args.world_size)
    except (UsageError, ProfileError) as exc:
        print(f"preflight: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    report = run(args, settings, injections)
    write_report(args.json, report)
    print(summary(report, args.json))
    return exit_status(report)


def run(args: argparse.Namespace, settings: Settings, injections: dict[str, int]) -> dict[str, Any]:
    """The host flow and its report; whatever the flow raises is a failed check in it, never a missing report."""
    started_at, started = now(), time.monotonic()
    results: dict[str, Result] = {}
    found = versions.collect()
    try:
        settings = host_flow(args, settings, injections, results, found)
    except Exception as exc:  # the report must be written whatever went wrong: the crash is its failed check
        record_crash(results, exc)
    return build_report(
        results=results,
        order_reference=args.order,
        versions=found,
        device=args.device,
        world_size=args.world_size,
        thresholds=settings.thresholds,
        threshold_sources=settings.threshold_sources,
        profile=settings.describe(),
        started_at=started_at,
        finished_at=now(),
        duration_s=time.monotonic() - started,
        split=split.build(results, args.world_size),
        injected=[f"{fault}:{rank}" for fault, rank in injections.items()],
    )


def host_flow(
    args: argparse.Namespace,
    settings: Settings,
    injections: dict[str, int],
    results: dict[str, Result],
    found: dict[str, Any],
) -> Settings:
    """The checks in the order the node needs them, each result recorded as soon as it is known; returns the
    settings they ran with (the thresholds for the node's cards)."""
    device = args.device
    found["driver"] = hardware.driver_version(device)
    listed, cards_note = hardware.node_cards(device)
    found["node_gpus"] = listed or []
    # The node's cards are known from here on, before any gate runs: their own floors apply.
    settings = for_the_cards(settings, device, listed)
    thresholds = settings.thresholds
    before = idle_snapshot(device, settings, "before")
    gate(results, settings, "fabric", lambda: hardware.fabric(device))
    # Only now may CUDA be asked (in a child process): the idle snapshot never sees the preflight itself.
    torch_facts = torch_facts_or_error(args.cuda_init_timeout)
    if isinstance(torch_facts, dict):
        versions.add_torch(found, torch_facts)
    results["stack"], unusable = stack_check(torch_facts, found, device, settings)
    gate(results, settings, "gpu_health", lambda: hardware.gpu_health(device, thresholds))
    gate(results, settings, "nvlink", lambda: hardware.nvlink(device, thresholds, args.world_size))
    # DCGM's diagnostic needs the cards to itself: it runs before the ranks start.
    dcgm = settings.dcgm
    gate(results, settings, "dcgm_diag", lambda: hardware.dcgm_diag(device, dcgm["level"], dcgm["timeout_s"]))
    shortage = card_shortage(args, found, listed, cards_note)
    blocker = ranks_blocker(unusable, shortage, results, torch_facts)
    if not blocker:
        settings = calibrated_by_nccl_tests(settings, args)
    results.update(not_run(blocker, settings) if blocker else launch_ranks(args, settings, injections))
    if shortage is not None:
        results["arch"] = shortage  # a missing card fails the preflight, whatever the profile selects
    after = idle_snapshot(device, settings, "after")
    results["idle_cards"] = hardware.idle_cards(before, after) if before and after else not_selected("idle_cards")
    arch = results.get("arch")
    if arch is not None:
        versions.add_cards(found, [entry.get("card", {}) for entry in arch.metrics.get("ranks", [])])
    return settings


def for_the_cards(settings: Settings, device: str, listed: list[dict[str, str]] | None) -> Settings:
    """The card-specific thresholds for the cards nvidia-smi lists (cards.py); the cpu rehearsal keeps the
    defaults, which it does not apply."""
    if device != "cuda":
        return dataclasses.replace(settings, threshold_sources={"card": "cpu rehearsal: card floors do not apply"})
    thresholds, sources = cards.for_node(settings.thresholds, settings.thresholds_given, listed or [])
    return dataclasses.replace(settings, thresholds=thresholds, threshold_sources=sources)


def calibrated_by_nccl_tests(settings: Settings, args: argparse.Namespace) -> Settings:
    """The busbw floor from this node's own nccl-tests run, when installed (it runs on the cards before the ranks)."""
    if args.device != "cuda" or args.world_size < 2 or not settings.runs("allreduce"):
        return settings
    if "busbw_floor_gbps" in settings.thresholds_given:
        return settings
    measured = nccl_tests.measure(args.world_size)
    thresholds, sources = nccl_tests.calibrate(
        settings.thresholds, settings.threshold_sources, settings.thresholds_given, measured
    )
    return dataclasses.replace(settings, thresholds=thresholds, threshold_sources=sources)


def not_selected(name: str) -> Result:
    return Result(name, SKIP, "not in the profile's checks")


def gate(results: dict[str, Result], settings: Settings, name: str, check: Any) -> None:
    """One host check, unless the profile leaves it out; whatever it raises is its own failure, with the message."""
    if not settings.runs(name):
        results[name] = not_selected(name)
        return
    try:
        results[name] = check()
    except Exception as exc:  # a gate that crashes fails, naming itself; the other checks still run
        results[name] = Result(name, FAIL, f"{name} failed: {type(exc).__name__}: {exc}")


def idle_snapshot(device: str, settings: Settings, phase: str) -> tuple[str, str, dict[str, Any]] | None:
    """nvidia-smi's view of the cards' memory and processes; None when the profile leaves idle_cards out."""
    if not settings.runs("idle_cards"):
        return None
    try:
        return hardware.idle_snapshot(device, settings.thresholds, phase)
    except Exception as exc:  # a crash is this phase's failure, with the message
        return FAIL, f"{phase}: {type(exc).__name__}: {exc}", {}


def torch_facts_or_error(timeout_s: float) -> dict[str, Any] | facts.FactsError:
    try:
        return facts.from_child(timeout_s)
    except facts.FactsError as exc:
        return exc


def stack_check(
    torch_facts: dict[str, Any] | facts.FactsError, found: dict[str, Any], device: str, settings: Settings
) -> tuple[Result, str | None]:
    """`stack`, and why no rank can run on this stack (None when they can).

    No PyTorch, or a CPU-only build on --device cuda, fails `stack` whatever the profile selects: it is why
    nothing else ran. CUDA that does not answer fails it too; the ranks' blocker then is decided with the others.
    """
    if isinstance(torch_facts, facts.FactsError):
        return Result("stack", FAIL, f"stack: {torch_facts.detail}"), None
    if "torch_error" in torch_facts:
        detail = f"stack: torch is not importable ({torch_facts['torch_error']}): {stack.FIX}"
        return Result("stack", FAIL, detail), CANNOT_RUN
    card = settings.threshold_sources.get("card", "B200 (sm_100)")
    result = stack.evaluate(found, device=device, thresholds=settings.thresholds, card=card)
    if device == "cuda" and not found["cuda"]:
        return result, CANNOT_RUN
    return (result if settings.runs("stack") else not_selected("stack")), None


def card_shortage(
    args: argparse.Namespace, found: dict[str, Any], cards: list[dict[str, str]] | None, note: str
) -> Result | None:
    """`arch` failed when fewer cards are visible than ranks asked: CUDA's count when it answered, else nvidia-smi's."""
    if args.device != "cuda":
        return None
    if found["cuda"]:
        visible = found["cuda_device_count"]
    elif cards is not None:
        visible = len(cards)
    else:
        return None  # neither CUDA nor nvidia-smi could count them: `stack` and the gates say why
    return hardware.evaluate_card_count(visible, args.world_size, cards, note, os.environ.get("CUDA_VISIBLE_DEVICES"))


def ranks_blocker(
    unusable: str | None,
    shortage: Result | None,
    results: dict[str, Result],
    torch_facts: dict[str, Any] | facts.FactsError,
) -> str | None:
    """Why the ranks are not spawned, the most basic reason first; None when they are."""
    reasons = [
        unusable,
        shortage and f"{shortage.metrics['visible_cards']} of {shortage.metrics['world_size']} cards visible",
        "the NVSwitch fabric is not ready" if results["fabric"].status == FAIL else None,
        torch_facts.reason if isinstance(torch_facts, facts.FactsError) else None,
    ]
    return next((reason for reason in reasons if reason), None)


def not_run(reason: str, settings: Settings) -> dict[str, Result]:
    return {
        name: Result(name, SKIP, f"not run: {reason}") if settings.runs(name) else not_selected(name)
        for name in RANK_CHECKS
    }


def launch_ranks(args: argparse.Namespace, settings: Settings, injections: dict[str, int]) -> dict[str, Result]:
    """The rank checks, from one process per card; none is spawned when the profile selects no rank check."""
    if not any(settings.runs(name) for name in RANK_CHECKS):
        return {name: not_selected(name) for name in RANK_CHECKS}
    from provisioning.preflight import launcher

    run_dir = Path(tempfile.mkdtemp(prefix="preflight-"))
    try:
        return launcher.launch(
            {
                "device": args.device,
                "settings": settings,
                "timeout_s": args.timeout or settings.timeout_s,
                "expect_arch": args.expect_arch,
                "injections": injections,
            },
            world_size=args.world_size,
            run_dir=run_dir,
            timeout_s=args.timeout or settings.timeout_s,
        )
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def record_crash(results: dict[str, Result], exc: Exception) -> None:
    """An unexpected error in the host flow: the first check without a result fails with it, the others were not
    reached. It is printed too (one line), in case every check already had its result."""
    what = f"{type(exc).__name__}: {exc}"
    print(f"preflight: error: the host flow raised {what}", file=sys.stderr)
    missing = [name for name in ALL_CHECKS if name not in results]
    if missing:
        results[missing[0]] = Result(missing[0], FAIL, f"{missing[0]} failed: the preflight raised {what}: rerun")
    for name in missing[1:]:
        results[name] = Result(name, SKIP, f"not reached: the preflight raised {type(exc).__name__}")

"""The command line: validate, run the host checks and gates, launch the ranks, write the report.

Exit status: 0 when every check passed (or warned, or skipped), 1 when a check failed, 2 on a usage error
(bad arguments, a world size larger than the visible cards, an unreadable or invalid profile, a report path
that cannot be written).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from provisioning.preflight import hardware, split, versions
from provisioning.preflight.checks import stack
from provisioning.preflight.profile import ProfileError, Settings, read_profile, resolve
from provisioning.preflight.report import (
    ALL_CHECKS,
    EXIT_FAILED,
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


def validate(args: argparse.Namespace) -> dict[str, int]:
    if args.world_size < 1:
        raise UsageError(f"--world-size must be 1 or more, not {args.world_size}")
    if args.expect_arch is not None and not ARCH.match(args.expect_arch):
        raise UsageError(f"--expect-arch takes a name like sm_100, not {args.expect_arch!r}")
    if args.order is not None and not (0 < len(args.order) <= 64):
        raise UsageError("--order takes a reference of 1 to 64 characters")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
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


def visible_cards(device: str) -> int:
    """Cards this process may use, counted without creating a CUDA context."""
    import torch

    if device == "cuda":
        return torch.cuda.device_count()
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
    started_at, started = now(), time.monotonic()
    try:
        import torch  # the one dependency; its absence is a failed `stack`, not a usage error
    except ImportError as exc:
        stopped = Result("stack", FAIL, f"stack: torch is not importable ({exc}): {stack.FIX}")
        return stack_only(args, settings, started_at, started, stopped, {"python": sys.version.split()[0]})
    if args.device == "cuda" and not torch.version.cuda:
        found = versions.collect(args.device)
        stopped = stack.evaluate(found, device=args.device, thresholds=settings.thresholds)
        return stack_only(args, settings, started_at, started, stopped, found)
    cards = visible_cards(args.device)
    if args.world_size > cards:
        hint = (
            f" (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']})"
            if "CUDA_VISIBLE_DEVICES" in os.environ
            else ""
        )
        print(
            f"preflight: error: --world-size {args.world_size} but {cards} {args.device} cards are visible{hint}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    report = run(args, settings, injections, started_at, started)
    write_report(args.json, report)
    print(summary(report, args.json))
    return exit_status(report)


def run(
    args: argparse.Namespace, settings: Settings, injections: dict[str, int], started_at: str, started: float
) -> dict[str, Any]:
    from provisioning.preflight import launcher

    found = versions.collect(args.device)
    thresholds = settings.thresholds
    results: dict[str, Result] = {}

    def gate(name: str, check: Any) -> None:
        results[name] = check() if settings.runs(name) else Result(name, SKIP, "not in the profile's checks")

    gate("stack", lambda: stack.evaluate(found, device=args.device, thresholds=thresholds))
    idle = settings.runs("idle_cards")
    before = hardware.idle_snapshot(args.device, thresholds, "before") if idle else None
    gate("gpu_health", lambda: hardware.gpu_health(args.device, thresholds))
    gate("nvlink", lambda: hardware.nvlink(args.device, thresholds))
    # DCGM's diagnostic needs the cards to itself: it runs before the ranks start.
    gate("dcgm_diag", lambda: hardware.dcgm_diag(args.device, settings.dcgm["level"], settings.dcgm["timeout_s"]))
    run_dir = Path(tempfile.mkdtemp(prefix="preflight-"))
    try:
        results.update(
            launcher.launch(
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
        )
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if before is not None:
        after = hardware.idle_snapshot(args.device, thresholds, "after")
        results["idle_cards"] = hardware.idle_cards(before, after)
    else:
        results["idle_cards"] = Result("idle_cards", SKIP, "not in the profile's checks")
    arch = results.get("arch")
    if arch is not None:
        versions.add_cards(found, [entry.get("card", {}) for entry in arch.metrics.get("ranks", [])])
    return build_report(
        results=results,
        order_reference=args.order,
        versions=found,
        device=args.device,
        world_size=args.world_size,
        thresholds=thresholds,
        profile=settings.describe(),
        started_at=started_at,
        finished_at=now(),
        duration_s=time.monotonic() - started,
        split=split.build(results, args.world_size),
        injected=[f"{fault}:{rank}" for fault, rank in injections.items()],
    )


def stack_only(
    args: argparse.Namespace,
    settings: Settings,
    started_at: str,
    started: float,
    stopped: Result,
    found: dict[str, Any],
) -> int:
    """No usable PyTorch for the device (none, or a CPU-only build on --device cuda): `stack` fails, every
    other check is skipped, and the report is still written, so the operator sees what to install."""
    results = {name: Result(name, SKIP, "not run: the stack cannot run on this device") for name in ALL_CHECKS}
    results["stack"] = stopped
    report = build_report(
        results=results,
        order_reference=args.order,
        versions=found,
        device=args.device,
        world_size=args.world_size,
        thresholds=settings.thresholds,
        profile=settings.describe(),
        started_at=started_at,
        finished_at=now(),
        duration_s=time.monotonic() - started,
        split=None,
        injected=[],
    )
    write_report(args.json, report)
    print(summary(report, args.json))
    return EXIT_FAILED

"""`b200`: the order's command on its node, for the account the order rents (no Django, no root; Python 3.8+).

    b200 status [--json]       the order, its end, the data window, the cards, the validated Python, a notice
    b200 env                   the line that activates the validated Python:  eval "$(b200 env)"
    b200 welcome               the login banner (prints nothing for an account with no rental)
    b200 trial [...] -- SCRIPT [ARGS...]   your script on one card, then two: figures and verdicts
    b200 verify                the quick part of the hand-over preflight, compared with the hand-over report

Run as `python -m provisioning.node_tools.b200`. It reads the order's state file, which the shop writes as root:
$B200_ORDER_FILE, else /var/lib/b200/orders/<login name>.json, a JSON object:

    {"reference", "node", "language": "en"|"es"|"fr", "ends_at": ISO 8601, "data_until": ISO 8601 or null,
     "cards": [{"index", "name", "memory_gb", "healthy"}],
     "environment": {"python": path, "activate": optional line, "versions": {"driver", "cuda", "torch", "nccl",
                     "python"}},
     "manifest_sha256", "scratch": [paths], "report": optional {"<check>.<metric>": number}}

and the notice the node writes before the end, ~/.b200/notice.json ({"ends_at", "reason", "seconds_left"}),
in the tenant's own home: read as a regular file of at most 64 KiB holding a JSON object, else ignored.

Exit status: 0 done, 1 a trial run or a verify figure did not pass (or the state file is damaged), 2 no rental
for this account, or a usage error.
"""

# The node may run an older Python than the shop: keep this file to Python 3.8.

from __future__ import annotations

import argparse
import errno
import json
import os
import pwd
import re
import shlex
import signal
import stat
import sys
from typing import Any

from provisioning.node_tools import b200_trial, b200_verify
from provisioning.node_tools.b200_text import (
    PHRASES,
    duration,
    items,
    labelled,
    language_of,
    parse_time,
    phrase,
    seconds_until,
    section,
    utc,
)

STATE_DIR = "/var/lib/b200/orders"
STATE_VARIABLE = "B200_ORDER_FILE"
LOGIN = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")  # never a path: the name becomes part of one
NOTICE_MAX_BYTES = 64 * 1024
EXIT_FAILED, EXIT_NO_RENTAL = 1, 2
EPILOG = """examples:
  b200 status                                  how long is left, the cards, the validated Python
  eval "$(b200 env)"                           use the validated Python in this shell
  b200 trial --steps 30 -- train.py --lr 3e-4  your script on 1 card then 2: ~/b200-trials/<UTC time>.json
  b200 verify                                  the cards measured again against the hand-over report

Before the end the node writes ~/.b200/notice.json; at the end your processes get SIGTERM, then SIGKILL:
save a checkpoint on SIGTERM (see b200_example.py beside this tool).

exit status: 0 done, 1 a run or a figure did not pass, 2 no rental for this account or a usage error"""
VERSION_LABELS = (("driver", "driver"), ("cuda", "CUDA"), ("torch", "PyTorch"), ("nccl", "NCCL"), ("python", "Python"))


class NoRental(Exception):
    """No state file for this account: it rents nothing on this node (exit 2)."""


class DamagedState(Exception):
    """The state file is there but unreadable (exit 1): the shop's fault, said plainly."""


# --- the order's state and the notice --------------------------------------------------------------------------


def state_path() -> str | None:
    given = os.environ.get(STATE_VARIABLE)
    if given:
        return given
    try:
        login = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return None
    return os.path.join(STATE_DIR, f"{login}.json") if LOGIN.match(login) else None


def read_state() -> dict[str, Any]:
    path = state_path()
    if path is None or not os.path.exists(path):
        raise NoRental(f"no rental for this account on this node (no order file at {path or STATE_DIR})")
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError) as exc:
        raise DamagedState(f"the order file {path} cannot be read ({exc}): please tell support") from exc
    if not isinstance(state, dict):
        raise DamagedState(f"the order file {path} is not a JSON object: please tell support")
    return state


def read_notice(home: str | None = None) -> dict[str, Any] | None:
    """~/.b200/notice.json when it is a regular file of at most 64 KiB holding a JSON object, else None.

    The tenant owns its home: the name may be a link (to /etc/shadow), a FIFO (a read would block), a huge file
    or garbage; none of them may hang or break `b200 status`."""
    path = os.path.join(home or os.path.expanduser("~"), ".b200", "notice.json")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.EACCES, errno.ENOTDIR):
            print(f"b200: {path} ignored: {exc.strerror}", file=sys.stderr)
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > NOTICE_MAX_BYTES:
            return None
        data = os.read(descriptor, NOTICE_MAX_BYTES + 1)
    finally:
        os.close(descriptor)
    try:
        notice = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return notice if isinstance(notice, dict) and len(data) <= NOTICE_MAX_BYTES else None


# --- status ------------------------------------------------------------------------------------------------------


def status_facts(state: dict[str, Any]) -> dict[str, Any]:
    environment = section(state, "environment")
    return {
        "reference": state.get("reference"),
        "ends_at": state.get("ends_at"),
        "seconds_left": seconds_until(parse_time(state.get("ends_at"))),
        "data_until": state.get("data_until"),
        "cards": items(state, "cards"),
        "environment": {"python": environment.get("python"), "versions": section(environment, "versions")},
        "manifest_sha256": state.get("manifest_sha256"),
        "notice": read_notice(),
    }


def cards_line(cards: list[Any], language: str) -> str:
    shown = []
    for card in cards:
        if isinstance(card, dict):
            health = phrase(language, "healthy" if card.get("healthy", True) else "unhealthy")
            memory = f" {card['memory_gb']} GB" if card.get("memory_gb") else ""
            shown.append(f"GPU {card.get('index', '?')} {card.get('name') or ''}{memory}, {health}".replace("  ", " "))
    return "; ".join(shown) or phrase(language, "none")


def end_line(facts: dict[str, Any], language: str) -> str:
    ends = parse_time(facts["ends_at"])
    if ends is None:
        return phrase(language, "none")
    left = facts["seconds_left"]
    remaining = f"{duration(left, language)} {phrase(language, 'left')}" if left else phrase(language, "ended")
    return f"{utc(ends)} UTC ({remaining})"


def data_line(facts: dict[str, Any], language: str) -> str:
    until = parse_time(facts["data_until"])
    return f"{utc(until)} UTC" if until else phrase(language, "no_data_window")


def versions_line(versions: dict[str, Any]) -> str:
    return ", ".join(f"{label} {versions[key]}" for key, label in VERSION_LABELS if versions.get(key)) or "?"


def notice_line(notice: dict[str, Any] | None, language: str) -> str:
    if not notice:
        return phrase(language, "none")
    reason_key = f"reason_{notice.get('reason')}"
    reason = phrase(language, reason_key) if reason_key in PHRASES["en"] else str(notice.get("reason") or "?")
    at = parse_time(notice.get("ends_at"))
    return phrase(language, "notice_line").format(reason=reason, at=utc(at) if at else "?")


def status_lines(state: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    language = language_of(state.get("language"))

    def line(key: str, value: str) -> str:
        return labelled(language, key, value)

    return [
        line("order", str(facts["reference"] or "?")),
        line("ends", end_line(facts, language)),
        line("data_until", data_line(facts, language)),
        line("cards", cards_line(facts["cards"], language)),
        line("python", str(facts["environment"]["python"] or "?")),
        line("versions", versions_line(facts["environment"]["versions"])),
        line("manifest", str(facts["manifest_sha256"] or "?")),
        line("notice", notice_line(facts["notice"], language)),
    ]


def command_status(args: argparse.Namespace) -> int:
    state = read_state()
    facts = status_facts(state)
    if args.json:
        print(json.dumps(facts, indent=2, ensure_ascii=False))
    else:
        print("\n".join(status_lines(state, facts)))
    return 0


# --- env and welcome ---------------------------------------------------------------------------------------------


def activate_line(state: dict[str, Any]) -> str | None:
    environment = section(state, "environment")
    activate = environment.get("activate")
    if isinstance(activate, str) and activate.strip():
        return activate.strip()
    python = environment.get("python")
    if not isinstance(python, str) or not python:
        return None
    return f"export PATH={shlex.quote(os.path.dirname(python))}:$PATH"


def command_env(args: argparse.Namespace) -> int:
    line = activate_line(read_state())
    if line is None:
        raise DamagedState("the order file names no validated Python: please tell support")
    print(line)
    return 0


def welcome_lines(state: dict[str, Any]) -> list[str]:
    language = language_of(state.get("language"))
    facts = status_facts(state)
    environment = facts["environment"]
    python = f"{environment['python'] or '?'} ({versions_line(environment['versions'])})"
    activate = activate_line(state)
    until = parse_time(facts["data_until"])
    data = f"{phrase(language, 'data_after')} {utc(until)} UTC" if until else phrase(language, "no_data_window")
    lines = [
        labelled(language, "welcome", f"{phrase(language, 'order')} {facts['reference'] or '?'}"),
        "  " + labelled(language, "cards", cards_line(facts["cards"], language)),
        "  " + labelled(language, "ends", f"{end_line(facts, language)}; {data}"),
        "  " + labelled(language, "python", python),
    ]
    if activate:
        lines.append("    " + labelled(language, "activate", activate))
    scratch = ", ".join(str(path) for path in items(state, "scratch")) or phrase(language, "none")
    lines.append("  " + labelled(language, "scratch", scratch))
    if facts["notice"]:
        lines.append("  " + labelled(language, "notice", notice_line(facts["notice"], language)))
    return lines + ["  " + phrase(language, "help")]


def command_welcome(args: argparse.Namespace) -> int:
    """Never fails a login: an account with no rental sees nothing, a damaged order file one line."""
    try:
        state = read_state()
    except NoRental:
        return 0
    except DamagedState as exc:
        print(f"b200: {exc}", file=sys.stderr)
        return 0
    print("\n".join(welcome_lines(state)))
    return 0


# --- trial and verify --------------------------------------------------------------------------------------------


def optional_state() -> dict[str, Any] | None:
    try:
        return read_state()
    except NoRental:
        return None


def command_trial(args: argparse.Namespace) -> int:
    state = optional_state()
    if state is None and not (args.device == "cpu" and args.python):
        raise NoRental("no rental for this account on this node: `b200 trial --device cpu --python PATH` still works")
    if args.steps < 1 or args.warmup < 0 or args.warmup >= args.steps or args.timeout <= 0:
        raise UsageError("--steps must be 1 or more, --warmup under --steps, --timeout positive")
    try:
        return b200_trial.trial(args, state)
    except b200_trial.TrialError as exc:
        raise UsageError(str(exc)) from exc


def command_verify(args: argparse.Namespace) -> int:
    state = read_state()
    try:
        return b200_verify.verify(args, state)
    except b200_verify.VerifyError as exc:
        raise UsageError(str(exc)) from exc


class UsageError(Exception):
    """Said on one line, exit 2."""


# --- the command line --------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    tool = argparse.ArgumentParser(
        prog="b200",
        description="Your rented B200 node: the order, the validated Python, and the two-card protocol on your script.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = tool.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    status = commands.add_parser("status", help="the order, its end, the data window, the cards, a notice")
    status.add_argument("--json", action="store_true", help="one JSON object (the keys are stable)")
    status.set_defaults(run=command_status)
    commands.add_parser("env", help='the line that activates the validated Python: eval "$(b200 env)"').set_defaults(
        run=command_env
    )
    commands.add_parser("welcome", help="the login banner").set_defaults(run=command_welcome)
    add_trial(commands)
    b200_verify.add_parser(commands).set_defaults(run=command_verify)
    return tool


def add_trial(commands: Any) -> None:
    trial = commands.add_parser(
        "trial",
        usage="b200 trial [options] -- SCRIPT [ARGS...]",
        help="your script on 1 card, then 2: step times, memory, scaling, verdicts",
        description=(
            "Runs SCRIPT unchanged through torchrun on 1 card, then 2 (same arguments and environment), counts and"
            " times its optimizer steps, stops each run after --steps steps or --timeout seconds, and writes the"
            " figures to OUT/<UTC time>.json. The script reads LOCAL_RANK and WORLD_SIZE as under torchrun."
        ),
        epilog="Exit status: 0 when both runs made their steps, 1 when one did not (failed, timeout, no_steps).",
    )
    trial.add_argument("--steps", type=int, default=30, help="optimizer steps per run (default 30)")
    trial.add_argument("--warmup", type=int, default=5, help="first steps left out of the median (default 5)")
    trial.add_argument(
        "--device", choices=("cuda", "cpu"), help="default: cuda when the validated Python sees a card, else cpu"
    )
    trial.add_argument("--timeout", type=float, default=600.0, help="seconds per run before it is stopped (600)")
    trial.add_argument("--out", default="~/b200-trials", help="folder of the JSON report (default ~/b200-trials)")
    trial.add_argument("--python", help="the interpreter (default: the validated Python, else this one)")
    trial.add_argument("--master-port", type=int, default=0, help="torchrun's rendezvous port (default: a free one)")
    trial.add_argument("script", metavar="SCRIPT", help="your training script, after --")
    trial.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="its arguments")
    trial.set_defaults(run=command_trial)


def stop_on_sigterm() -> None:
    """The end of a rental sends SIGTERM: a trial then stops its runs (its `finally`) instead of orphaning them."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def main(argv: list[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(given)
    args.argv = given
    stop_on_sigterm()
    try:
        return int(args.run(args))
    except NoRental as exc:
        print(f"b200: {exc}", file=sys.stderr)
        return EXIT_NO_RENTAL
    except UsageError as exc:
        print(f"b200: {exc}", file=sys.stderr)
        return EXIT_NO_RENTAL
    except DamagedState as exc:
        print(f"b200: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("b200: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

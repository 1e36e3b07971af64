"""One run of `b200 trial`: torchrun started, stopped at its deadline, and every process of it gone after.

torchrun starts each rank in a session of its own (torch.distributed.elastic's subprocess handler), so killing
torchrun's process group does not reach the ranks, and a torchrun killed first leaves them orphaned. Every
process of a run therefore carries a marker in its environment (B200_TRIAL_RUN=<random>), inherited by the
ranks and whatever they start (DataLoader workers, a compiler), and the run is over only when /proc lists no
live process with that marker.
"""

# The node may run an older Python than the shop: keep this file to Python 3.8.
# ruff: noqa: S603 - the command is the validated Python running torchrun, built by the caller

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time

MARKER_VARIABLE = "B200_TRIAL_RUN"
GRACE_S = 5.0  # SIGTERM first (a script may save a checkpoint on it), SIGKILL after this
POLL_S = 0.1
TAIL_BYTES = 64 * 1024


def free_port() -> int:
    """A loopback port free now: each run's rendezvous gets its own, so two trials never meet."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def marked_processes(marker: str) -> list[int]:
    """Live processes (zombies are dead) whose environment carries the run's marker; none without /proc."""
    needle = f"{MARKER_VARIABLE}={marker}".encode() + b"\0"
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid() and carries(name, needle):
                found.append(int(name))
    return found


def carries(pid: str, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            if handle.read().rpartition(b")")[2].split()[:1] == [b"Z"]:
                return False
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return needle in b"\0" + handle.read()
    except OSError:  # gone meanwhile, or another user's
        return False


def signal_run(process: subprocess.Popen[bytes], marker: str, signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signum)  # torchrun's session (the tool started it with start_new_session)
    for pid in marked_processes(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


def stop_run(process: subprocess.Popen[bytes], marker: str, grace_s: float = GRACE_S) -> None:
    """SIGTERM to torchrun and every rank at once, SIGKILL to what is left after the grace; returns once torchrun
    is reaped and no marked process is left (or SIGKILL has been sent to all of them)."""
    signal_run(process, marker, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (process.poll() is None or marked_processes(marker)):
        time.sleep(POLL_S)
    signal_run(process, marker, signal.SIGKILL)
    process.wait()
    wait_gone(marker, grace_s)


def sweep(marker: str, grace_s: float = GRACE_S) -> list[int]:
    """After torchrun has exited: stop what the run left behind; the pids still alive after all that."""
    if not marked_processes(marker):
        return []
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in marked_processes(marker):
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
        if wait_gone(marker, grace_s):
            return []
    return marked_processes(marker)


def wait_gone(marker: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while marked_processes(marker):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def run_bounded(argv: list[str], env: dict[str, str], log_path: str, timeout_s: float) -> tuple[int, bool, list[int]]:
    """Runs argv (output to log_path) for at most timeout_s: (exit status, timed out, pids left alive).

    Whatever interrupts the wait (the deadline, Ctrl-C, the tool's own SIGTERM) stops the whole run first."""
    marker = os.urandom(8).hex()
    env = dict(env, **{MARKER_VARIABLE: marker})
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    timed_out = False
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        stop_run(process, marker)
    except BaseException:
        stop_run(process, marker)
        raise
    return int(process.returncode), timed_out, sweep(marker)


def tail(path: str, lines: int) -> str:
    """The last lines of a run's output (read from the end: a chatty script's log may be large)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])

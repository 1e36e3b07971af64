#!/usr/bin/env python3
"""The node's XID watcher: runs ON a GPU node as root, for good (a systemd service, docs/production.md), with the
standard library only (Python 3.8+). It registers with NVML (libnvidia-ml.so.1, through ctypes) for every card's
critical XID events and appends each one, as one JSON line, to a log that only root writes:

    {"at": <epoch seconds>, "index": <card>, "uuid": "GPU-...", "xid": <code>}

The health probe (health.py) reads that log instead of the kernel log: a tenant can put any text in the kernel
log through its own programs, but it cannot write here, and NVML reports only what the driver saw (issue 39).

    python3 xid_watch.py [--log /var/lib/b200-health/xid.jsonl]

The log is rotated once past 4 MiB (the previous one kept as .1, which the probe reads too). Exit 1 with the reason
when NVML cannot be loaded (no driver) or the log's folder is not root's alone.
"""

# ruff: noqa: N801 - NVML's own C names

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the node's Python may be 3.8: this shape is for the type checker only
    from typing import TypedDict

    class XidEvent(TypedDict):
        index: int
        uuid: str
        xid: int


XID_LOG = "/var/lib/b200-health/xid.jsonl"
ROTATE_BYTES = 4 << 20
NVML_SUCCESS, NVML_ERROR_TIMEOUT = 0, 10
EVENT_TYPE_XID = 0x0000000000000008  # nvmlEventTypeXidCriticalError
WAIT_MS = 5000


class Failed(Exception):
    pass


class nvmlEventData_t(ctypes.Structure):
    _fields_ = [  # noqa: RUF012 - ctypes reads it from the class
        ("device", ctypes.c_void_p),
        ("eventType", ctypes.c_ulonglong),
        ("eventData", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


def nvml_events(library: str = "libnvidia-ml.so.1") -> Iterator[XidEvent]:
    """Every card's critical XID events as NVML delivers them: {"index", "uuid", "xid"} (blocks between them)."""
    try:
        nvml = ctypes.CDLL(library)
    except OSError as exc:
        raise Failed(f"NVML cannot be loaded ({exc}): is the NVIDIA driver installed?") from None

    def call(name: str, *args: object) -> int:
        return int(getattr(nvml, name)(*args))

    if call("nvmlInit_v2") != NVML_SUCCESS:
        raise Failed("nvmlInit failed")
    count = ctypes.c_uint()
    call("nvmlDeviceGetCount_v2", ctypes.byref(count))
    events = ctypes.c_void_p()
    if call("nvmlEventSetCreate", ctypes.byref(events)) != NVML_SUCCESS:
        raise Failed("nvmlEventSetCreate failed")
    cards = {}
    for index in range(count.value):
        handle = ctypes.c_void_p()
        call("nvmlDeviceGetHandleByIndex_v2", index, ctypes.byref(handle))
        name = ctypes.create_string_buffer(96)
        call("nvmlDeviceGetUUID", handle, name, 96)
        if call("nvmlDeviceRegisterEvents", handle, ctypes.c_ulonglong(EVENT_TYPE_XID), events) != NVML_SUCCESS:
            raise Failed(f"card {index}: XID events cannot be registered")
        cards[handle.value] = (index, name.value.decode(errors="replace"))
    data = nvmlEventData_t()
    while True:
        status = call("nvmlEventSetWait_v2", events, ctypes.byref(data), ctypes.c_uint(WAIT_MS))
        if status == NVML_ERROR_TIMEOUT:
            continue
        if status != NVML_SUCCESS:
            raise Failed(f"nvmlEventSetWait failed ({status})")
        index, uuid = cards.get(data.device, (-1, "unknown"))
        yield {"index": index, "uuid": uuid, "xid": int(data.eventData)}


def log_open(path: str) -> int:
    """The log for appending, in a folder only root writes (made when missing); a link is never followed."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    info = os.lstat(folder)
    if info.st_uid != 0 or info.st_mode & 0o022 or os.path.islink(folder):
        raise Failed(f"{folder} is not root's alone: the probe would not trust the log")
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)


def watch(events: Iterator[XidEvent], path: str, clock: Callable[[], float] = time.time) -> int:
    """Append each event to the log (rotated past ROTATE_BYTES); returns how many were written."""
    written = 0
    fd = log_open(path)
    try:
        for event in events:
            if os.fstat(fd).st_size > ROTATE_BYTES:
                os.close(fd)
                os.replace(path, path + ".1")
                fd = log_open(path)
            line = json.dumps({"at": round(clock(), 6), **event}, sort_keys=True) + "\n"
            os.write(fd, line.encode())
            os.fsync(fd)
            written += 1
    finally:
        os.close(fd)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="xid_watch.py", description="Log the node's XID events from NVML.")
    parser.add_argument("--log", default=XID_LOG)
    args = parser.parse_args(argv)
    try:
        if os.geteuid() != 0:
            raise Failed("must run as root")
        watch(nvml_events(), args.log)
    except Failed as exc:
        print(f"xid_watch.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

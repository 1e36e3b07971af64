"""The versions a report keeps: what was verified, so a customer can reproduce it.

Collected in the launching process without creating a CUDA context (the idle-card gate runs after the
ranks exit and must find the cards free); each rank adds its own card's name, capability and UUID.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from typing import Any


def version_tuple(text: str | None) -> tuple[int, ...]:
    """`"2.7.1+cu128"` -> (2, 7, 1); `"570.124.06"` -> (570, 124, 6); unreadable -> ()."""
    if not text:
        return ()
    match = re.match(r"\d+(\.\d+)*", str(text).strip())
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def at_least(text: str | None, minimum: str) -> bool:
    found, wanted = version_tuple(text), version_tuple(minimum)
    return bool(found) and found[: len(wanted)] >= wanted


def cudnn_text(number: int | None) -> str | None:
    """cuDNN reports 90800 for 9.8.0 (and 8902 for 8.9.2 before version 9)."""
    if not number:
        return None
    if number >= 90000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"


def nvidia_smi_query(fields: str, timeout: float = 20) -> list[list[str]]:
    """Rows of `nvidia-smi --query-gpu=<fields>`; [] when the tool is missing or fails."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        completed = subprocess.run(  # noqa: S603 - fixed arguments, tool found on PATH
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],  # noqa: S607
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if completed.returncode != 0:
        return []
    return [[cell.strip() for cell in line.split(",")] for line in completed.stdout.splitlines() if line.strip()]


def collect(device: str) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    nccl = None
    if torch.version.cuda and dist.is_available() and dist.is_nccl_available():
        try:
            nccl = ".".join(str(part) for part in torch.cuda.nccl.version())
        except (RuntimeError, AttributeError):
            nccl = None
    node_gpus, driver = [], None
    if device == "cuda":
        driver = next(iter(nvidia_smi_query("driver_version")), [None])[0]
        keys = ("index", "name", "uuid", "compute_capability")  # compute_cap needs a 510+ driver
        rows = nvidia_smi_query("index,name,uuid,compute_cap")
        node_gpus = [dict(zip(keys, row, strict=True)) for row in rows if len(row) == len(keys)]
    try:
        cudnn = cudnn_text(torch.backends.cudnn.version()) if torch.version.cuda else None
    except RuntimeError:
        cudnn = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "nccl": nccl,
        "gloo": dist.is_available() and dist.is_gloo_available(),
        "driver": driver,
        # Every card nvidia-smi lists on the node (the ranks' own cards are below).
        "node_gpus": node_gpus,
        # What the build targets, e.g. ["sm_90", "sm_100", "sm_120", "compute_120"]; empty on CPU builds.
        "arch_list": list(torch.cuda.get_arch_list()) if torch.version.cuda else [],
        # Filled from the ranks: one entry per card used, in rank order.
        "gpu_names": [],
        "compute_capabilities": [],
        "gpu_uuids": [],
    }


def add_cards(versions: dict[str, Any], cards: list[dict[str, Any]]) -> None:
    """Each rank's card facts (from the `arch` check) into the versions, in rank order."""
    versions["gpu_names"] = [card.get("name") for card in cards if card.get("name")]
    versions["compute_capabilities"] = [card.get("capability") for card in cards if card.get("capability")]
    versions["gpu_uuids"] = [card.get("uuid") for card in cards if card.get("uuid")]

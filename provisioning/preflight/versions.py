"""The versions a report keeps: what was verified, so a customer can reproduce it.

The launching process records Python and the platform here, and the driver and the node's cards from nvidia-smi
(`hardware.py`); the PyTorch build's facts come from a child process (`facts.py`), so that the launcher never
initialises CUDA; each rank adds its own card's name, capability and UUID.
"""

from __future__ import annotations

import platform
import re
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


TORCH_FACTS = ("torch", "cuda", "cudnn", "nccl", "gloo", "arch_list", "cuda_device_count")


def collect() -> dict[str, Any]:
    """Every key the report's versions carry; what is not known yet stays None or empty."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": None,
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "gloo": None,
        "driver": None,
        # Every card nvidia-smi lists on the node (the ranks' own cards are below).
        "node_gpus": [],
        # What the build targets, e.g. ["sm_90", "sm_100", "sm_120", "compute_120"]; empty on CPU builds.
        "arch_list": [],
        # The cards CUDA lets the ranks use (CUDA_VISIBLE_DEVICES applies); None until the child answered.
        "cuda_device_count": None,
        # Filled from the ranks: one entry per card used, in rank order.
        "gpu_names": [],
        "compute_capabilities": [],
        "gpu_uuids": [],
    }


def add_torch(versions: dict[str, Any], facts: dict[str, Any]) -> None:
    """The facts the child process reported (`facts.collect`) into the versions."""
    versions.update({key: facts[key] for key in TORCH_FACTS if key in facts})


def add_cards(versions: dict[str, Any], cards: list[dict[str, Any]]) -> None:
    """Each rank's card facts (from the `arch` check) into the versions, in rank order."""
    versions["gpu_names"] = [card.get("name") for card in cards if card.get("name")]
    versions["compute_capabilities"] = [card.get("capability") for card in cards if card.get("capability")]
    versions["gpu_uuids"] = [card.get("uuid") for card in cards if card.get("uuid")]

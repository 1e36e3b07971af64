"""The PyTorch build's facts, asked in a child process so that the launcher itself never initialises CUDA.

`python -m provisioning.preflight.facts` prints one JSON object: torch, CUDA, cuDNN, NCCL, gloo, the build's
arch list and how many cards CUDA sees. Counting the cards initialises CUDA (cuInit), which blocks or fails on
an HGX board whose NVSwitch fabric is not trained; in a child under a timeout that is a failed `stack`, not a
hung preflight, and the launcher holds no CUDA state when the idle-card gate looks at the cards.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

from provisioning.preflight.hardware import ToolError, ToolTimeout, run_tool
from provisioning.preflight.versions import cudnn_text


class FactsError(Exception):
    """The child gave no facts: `detail` says why and what to do, `reason` says it in a few words."""

    def __init__(self, detail: str, reason: str) -> None:
        super().__init__(detail)
        self.detail, self.reason = detail, reason


def collect() -> dict[str, Any]:
    """In the child: the facts, or only `torch_error` when torch cannot be imported."""
    try:
        import torch
        import torch.distributed as dist
    except (ImportError, OSError) as exc:  # OSError: a CUDA library the build needs is missing
        return {"torch_error": str(exc)}
    cuda = torch.version.cuda
    return {
        "torch": torch.__version__,
        "cuda": cuda,
        "cudnn": cudnn_version(torch) if cuda else None,
        "nccl": nccl_version(torch, dist) if cuda else None,
        "gloo": dist.is_available() and dist.is_gloo_available(),
        # What the build targets, e.g. ["sm_90", "sm_100", "sm_120", "compute_120"]; empty on CPU builds.
        "arch_list": list(torch.cuda.get_arch_list()) if cuda else [],
        # The cards CUDA lets a process use (CUDA_VISIBLE_DEVICES applies); this is what initialises CUDA.
        "cuda_device_count": torch.cuda.device_count() if cuda else 0,
    }


def cudnn_version(torch: Any) -> str | None:
    try:
        return cudnn_text(torch.backends.cudnn.version())
    except RuntimeError:
        return None


def nccl_version(torch: Any, dist: Any) -> str | None:
    if not (dist.is_available() and dist.is_nccl_available()):
        return None
    try:
        return ".".join(str(part) for part in torch.cuda.nccl.version())
    except (RuntimeError, AttributeError):
        return None


def from_child(timeout_s: float) -> dict[str, Any]:
    """The facts from a child process; FactsError when it does not answer within `timeout_s` or fails."""
    try:
        completed = run_tool([sys.executable, "-m", "provisioning.preflight.facts"], timeout=timeout_s)
    except ToolTimeout as exc:
        raise FactsError(
            f"CUDA did not initialise within {timeout_s:g} s (a child process asking torch for its versions and"
            " cards did not answer): check nvidia-fabricmanager (systemctl status nvidia-fabricmanager; the"
            " `fabric` check) and the driver (nvidia-smi; dmesg for Xid or NVRM errors)",
            "CUDA did not initialise",
        ) from exc
    except ToolError as exc:
        raise FactsError(str(exc), "torch could not report its versions and cards") from exc
    lines = completed.stdout.strip().splitlines()
    if completed.returncode == 0 and lines:
        with contextlib.suppress(json.JSONDecodeError):
            facts: dict[str, Any] = json.loads(lines[-1])  # the child prints one JSON object, its last line
            return facts
    said = (completed.stderr.strip().splitlines() or ["no message"])[-1]
    raise FactsError(
        f"asking torch for its versions and cards failed ({said}): check the PyTorch install"
        " (python -c 'import torch') and the driver (nvidia-smi; dmesg for Xid or NVRM errors)",
        "torch could not report its versions and cards",
    )


if __name__ == "__main__":
    print(json.dumps(collect()))

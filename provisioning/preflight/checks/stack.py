"""`stack`: the PyTorch build, its CUDA runtime, NCCL and the driver can run the node's cards. A host check.

On cuda: torch >= 2.7, NCCL present, and the CUDA runtime and driver the node's cards need (cards.py: B200
CUDA >= 12.8 and driver >= 570; H100/H200 CUDA >= 11.8; A100 CUDA >= 11.0; no rule for a card without one).
On cpu (the rehearsal): torch >= 2.7 and gloo present; the CUDA / NCCL / driver parts do not apply and are
recorded as such, and the check passes. We chose pass over warn: the rehearsal's job is to exercise the
logic, and a warning on every CPU run would teach everyone to ignore warnings.
"""

from __future__ import annotations

from typing import Any

from provisioning.preflight.report import FAIL, PASS, Result
from provisioning.preflight.versions import at_least

FIX = "install a CUDA 12.8+ build of PyTorch 2.7 or newer (the cu128 wheels or later)"


def evaluate(
    versions: dict[str, Any], *, device: str, thresholds: dict[str, Any], card: str = "B200 (sm_100)"
) -> Result:
    torch_version = versions.get("torch")
    min_torch = thresholds.get("min_torch")
    problems = []
    if min_torch and not at_least(torch_version, min_torch):
        problems.append(f"torch {torch_version} is older than {min_torch}, the first release for Blackwell (sm_100)")
    metrics = {key: versions.get(key) for key in ("torch", "cuda", "cudnn", "nccl", "gloo", "driver")}
    if device == "cpu":
        if not versions.get("gloo"):
            problems.append(f"torch {torch_version} has no gloo backend, which the CPU rehearsal needs")
        if problems:
            return Result("stack", FAIL, "stack: " + "; ".join(problems) + f": {FIX}", metrics)
        metrics["cuda_rule"] = "not applicable on cpu"
        cuda = versions.get("cuda") or "none"
        nccl = versions.get("nccl") or "none"
        return Result(
            "stack",
            PASS,
            f"cpu rehearsal: torch {torch_version} with gloo; the CUDA >= {thresholds.get('min_cuda')} and NCCL"
            f" rule applies with --device cuda (this build: CUDA {cuda}, NCCL {nccl})",
            metrics,
        )
    cuda = versions.get("cuda")
    min_cuda = thresholds.get("min_cuda")
    if not cuda:
        problems.append(f"torch {torch_version} is a CPU-only build")
    elif min_cuda and not at_least(cuda, min_cuda):
        problems.append(f"torch {torch_version} is built for CUDA {cuda}; {card} needs CUDA {min_cuda}+")
    if not versions.get("nccl"):
        problems.append(f"torch {torch_version} has no NCCL, which two cards need")
    fixes = [FIX] if problems else []
    driver, min_driver = versions.get("driver"), thresholds.get("min_driver")
    if driver and min_driver and not at_least(driver, min_driver):
        problems.append(f"the NVIDIA driver {driver} is older than {min_driver}, the first for {card}")
        fixes.append(f"install NVIDIA driver {min_driver} or newer")
    if problems:
        return Result("stack", FAIL, "stack: " + "; ".join(problems) + ": " + " and ".join(fixes), metrics)
    rule = f"CUDA >= {min_cuda} for {card}" if min_cuda else f"no CUDA minimum known for {card}"
    return Result(
        "stack",
        PASS,
        f"torch {torch_version}, CUDA {cuda}, cuDNN {versions.get('cudnn')}, NCCL {versions.get('nccl')},"
        f" driver {driver or 'not reported'} ({rule})",
        metrics,
    )

"""`arch`: the build has native kernels for every card, and real kernels launch on it.

PyTorch's own compatibility check only warns; the failure comes at the first kernel launch ("no kernel
image is available for execution on the device"). So each rank launches real kernels on its card.
On cpu there is no CUDA architecture: the check skips, except with --expect-arch, which then fails.
"""

from __future__ import annotations

from typing import Any

import torch

from provisioning.preflight.checks.stack import FIX
from provisioning.preflight.context import RankContext
from provisioning.preflight.report import FAIL, PASS, SKIP, Result


def sm_name(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def without_suffix(arch: str) -> str:
    """`sm_100a` and `sm_100f` (arch- and family-specific targets) name the card `sm_100`."""
    return arch.rstrip("af")


def is_native(sm: str, arch_list: list[str]) -> bool:
    """`sm_100` counts as native for `sm_100`, `sm_100a` and `sm_100f` (arch-specific cubins); PTX does not."""
    return any(arch == sm or (arch.startswith(sm) and arch[len(sm) :] in ("a", "f")) for arch in arch_list)


def evaluate(
    *,
    capability: tuple[int, int] | None,
    card: str,
    arch_list: list[str],
    expect: str | None,
    torch_version: str,
) -> tuple[str, str]:
    """The rule on one card's facts, before any kernel launch: (status, detail)."""
    if capability is None:
        if expect:
            return FAIL, (
                f"this device has no CUDA architecture (build arch list: {arch_list or 'none'}), so it is not"
                f" {expect}: run the preflight with --device cuda on the ordered node"
            )
        return SKIP, f"no CUDA architecture on this device (build arch list: {arch_list or 'none'})"
    sm = sm_name(capability)
    if expect and sm != without_suffix(expect):
        return FAIL, f"{card} is {sm}, not the expected {expect}: this node does not carry the ordered cards"
    if not is_native(sm, arch_list):
        ptx = f"compute_{sm[3:]}" in arch_list
        how = "only PTX, which the driver must JIT-compile" if ptx else "no kernels"
        return FAIL, f"torch {torch_version} has {how} for {sm} (build targets: {' '.join(arch_list)}): {FIX}"
    return PASS, f"{card} is {sm}, native in the build"


def card_facts(ctx: RankContext) -> dict[str, Any]:
    if not ctx.is_cuda:
        return {"rank": ctx.rank, "device": "cpu"}
    props = torch.cuda.get_device_properties(ctx.device)
    uuid = getattr(props, "uuid", None)
    return {
        "rank": ctx.rank,
        "device": str(ctx.device),
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sm": sm_name((props.major, props.minor)),
        "uuid": f"GPU-{uuid}" if uuid is not None else None,
        "memory_bytes": props.total_memory,
        "multiprocessors": props.multi_processor_count,
    }


def launch_kernels(ctx: RankContext) -> None:
    """Real kernels on the card: an elementwise op, a reduction and a matmul in the run's precision."""
    values = torch.arange(4096, device=ctx.device, dtype=torch.float32)
    total = (values * 2).sum().item()
    if total != 4095 * 4096:
        raise RuntimeError(f"a reduction returned {total}, expected {4095 * 4096}")
    ones = torch.ones(64, 64, device=ctx.device, dtype=ctx.dtype)
    product = (ones @ ones).float()
    ctx.synchronize()
    if not bool((product == 64).all()):
        raise RuntimeError("a 64 x 64 matmul of ones did not return 64 everywhere")


def run(ctx: RankContext) -> Result:
    facts = card_facts(ctx)
    arch_list = list(torch.cuda.get_arch_list()) if torch.version.cuda else []
    capability = (
        (int(facts["capability"].split(".")[0]), int(facts["capability"].split(".")[1])) if ctx.is_cuda else None
    )
    status, detail = evaluate(
        capability=capability,
        card=facts.get("name", "cpu"),
        arch_list=arch_list,
        expect=ctx.expect_arch,
        torch_version=torch.__version__,
    )
    metrics = {"card": facts, "arch_list": arch_list, "expect_arch": ctx.expect_arch}
    if status != PASS:
        return Result("arch", status, detail, metrics)
    try:
        launch_kernels(ctx)
    except Exception as exc:  # the point of the check: whatever the first launch raises
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if "no kernel image" in message:
            detail = f"torch {torch.__version__} has no {facts['sm']} kernels ({message}): {FIX}"
        else:
            detail = (
                f"a kernel failed on {facts['name']} ({message}): check `dmesg` for Xid errors, run dcgmi diag -r 2"
            )
        return Result("arch", FAIL, detail, metrics)
    return Result("arch", PASS, detail + "; kernels launch", metrics)

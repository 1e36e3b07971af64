"""`extensions`: each compiled extension the profile names imports and runs one op on every card.

A compiled extension proves itself only by running (flash-attn builds sm_100 only with nvcc 12.8+). The op's
result is compared with a reference torch op when the profile gives one; otherwise it must be finite.
On cuda, when `cuobjdump` exists, the targets compiled into the extension's libraries are recorded too.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from provisioning.preflight.context import RankContext
from provisioning.preflight.profile import Extension
from provisioning.preflight.report import FAIL, PASS, SKIP, Result

DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def inputs(ctx: RankContext, seed: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(seed)

    def tensor(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator).to(device=ctx.device, dtype=ctx.dtype)

    return {
        "x": tensor(64, 64),
        "y": tensor(64, 64),
        "q": tensor(2, 128, 4, 64),
        "k": tensor(2, 128, 4, 64),
        "v": tensor(2, 128, 4, 64),
    }


def evaluate(text: str, namespace: dict[str, Any]) -> Any:
    """A dotted callable (called with `x`) or an expression over the namespace (see profile.py)."""
    if DOTTED.match(text):
        head, *rest = text.split(".")
        if head in namespace:
            target = namespace[head]
            for part in rest:
                target = getattr(target, part)
        else:
            module_name, attribute = text.rsplit(".", 1)
            target = getattr(importlib.import_module(module_name), attribute)
        if callable(target):
            return target(namespace["x"])
        return target
    # Operator data kept with the preparation, trusted like its setup step (see profile.py).
    return eval(text, {"__builtins__": __builtins__}, namespace)  # noqa: S307


def first_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, list | tuple) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    raise TypeError(f"the op returned {type(value).__name__}, not a tensor")


def shared_objects(module: Any) -> list[Path]:
    """The extension's compiled libraries, found through the module specs of what importing it loaded.

    Its package's own `.so` files, and every loaded module of the same name or prefix: flash-attn's kernels
    are the top-level `flash_attn_2_cuda*.so` beside the `flash_attn` package, not inside it.
    """
    top = module.__name__.split(".")[0]
    found: set[Path] = set()
    for name, loaded in list(sys.modules.items()):
        if name.split(".")[0] != top and not name.startswith(f"{top}_"):
            continue
        spec = getattr(loaded, "__spec__", None)
        origin = getattr(spec, "origin", None) or ""
        if ".so" in Path(origin).name:
            found.add(Path(origin))
        for folder in getattr(spec, "submodule_search_locations", None) or ():
            found.update(Path(folder).glob("*.so"))
    return sorted(found)


def elf_targets(module: Any) -> list[str]:
    """The sm_XX targets in the extension's shared libraries, per `cuobjdump --list-elf`; [] when unknown."""
    if shutil.which("cuobjdump") is None:
        return []
    targets: set[str] = set()
    for library in shared_objects(module)[:8]:
        try:
            listing = subprocess.run(  # noqa: S603 - fixed tool, a file path argument
                ["cuobjdump", "--list-elf", str(library)],  # noqa: S607
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        targets.update(re.findall(r"sm_\d+[af]?", listing))
    return sorted(targets)


def probe(ctx: RankContext, extension: Extension, seed: int) -> tuple[str | None, dict[str, Any]]:
    """Run one probe on this rank's card: (the problem, or None; metrics)."""
    metrics: dict[str, Any] = {"name": extension.name, "module": extension.module}
    fix = f"install a build of {extension.module} compiled for this card (CUDA 12.8+, sm_100 for B200)"
    try:
        module = importlib.import_module(extension.module)
    except Exception as exc:  # ImportError, or whatever the extension's import raises on this card
        return f"{extension.name}: importing {extension.module} failed ({type(exc).__name__}: {exc}): {fix}", metrics
    metrics["version"] = str(getattr(module, "__version__", "")) or None
    if ctx.is_cuda:
        metrics["elf_targets"] = elf_targets(module)
    namespace = {"torch": torch, "F": F, "mod": module, "device": ctx.device, "dtype": ctx.dtype}
    namespace.update(inputs(ctx, seed))
    try:
        result = first_tensor(evaluate(extension.op, namespace))
        ctx.synchronize()
    except Exception as exc:  # the probe's point: whatever the first op raises on this card
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return f"{extension.name}: `{extension.op}` raised {message}: {fix}", metrics
    if not bool(torch.isfinite(result.float()).all()):
        return f"{extension.name}: `{extension.op}` returned non-finite values: {fix}", metrics
    if extension.reference:
        try:
            expected = first_tensor(evaluate(extension.reference, namespace))
        except Exception as exc:  # a broken reference is the profile's fault, still a failed probe
            return (
                f"{extension.name}: the reference `{extension.reference}` raised {type(exc).__name__}: {exc}",
                metrics,
            )
        tolerance = 2e-2 if ctx.dtype == torch.bfloat16 else 1e-5
        atol = tolerance if extension.atol is None else extension.atol
        rtol = tolerance if extension.rtol is None else extension.rtol
        if result.shape != expected.shape:
            return (
                f"{extension.name}: shape {list(result.shape)} differs from the reference's {list(expected.shape)}",
                metrics,
            )
        difference = (result.float() - expected.float()).abs().max().item()
        metrics["max_abs_difference"] = difference
        if not torch.allclose(result.float(), expected.float(), atol=atol, rtol=rtol):
            return (
                f"{extension.name}: `{extension.op}` differs from the reference by up to {difference:.3g}"
                f" (atol {atol}, rtol {rtol}): the extension computes wrong results on this card: {fix}",
                metrics,
            )
    metrics["ok"] = True
    return None, metrics


def run(ctx: RankContext) -> Result:
    if not ctx.settings.extensions:
        return Result("extensions", SKIP, "the profile names no extension to probe")
    problems, probes = [], []
    for index, extension in enumerate(ctx.settings.extensions):
        problem, metrics = probe(ctx, extension, seed=100 + index)
        probes.append(metrics)
        if problem:
            problems.append(problem)
    names = ", ".join(extension.name for extension in ctx.settings.extensions)
    if problems:
        return Result("extensions", FAIL, "; ".join(problems), {"probes": probes})
    return Result(
        "extensions", PASS, f"ran on this card, checked against the reference where given: {names}", {"probes": probes}
    )

"""`load`, `forward`, `backward`: the model builds on the cards, gives a finite loss, learns.

These run eagerly under a collective ledger, so the report can say which collectives one training step
issues; the timed (and possibly compiled) steps come later, in `step_time`.
"""

from __future__ import annotations

import math
import time

import torch

from provisioning.preflight import model as model_module
from provisioning.preflight.collectives import CollectiveLedger
from provisioning.preflight.context import RankContext
from provisioning.preflight.model import local
from provisioning.preflight.report import FAIL, PASS, WARN, Result


def load(ctx: RankContext) -> Result:
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    started = time.perf_counter()
    metrics = model_module.build(ctx)
    ctx.synchronize()
    metrics["load_s"] = round(time.perf_counter() - started, 4)
    problem = model_module.sharding_problem(ctx, metrics)
    if problem:
        return Result(
            "load",
            FAIL,
            f"the model is not split as the profile asks ({problem}): check the torch.distributed build",
            metrics,
        )
    millions = metrics["parameters_local"] / 1e6
    how = f"FSDP2 over {ctx.world_size} cards" if ctx.settings.shard else f"replicated on {ctx.world_size} card(s)"
    return Result(
        "load",
        PASS,
        f"{metrics['parameters_total'] / 1e6:.1f} M parameters, {how}, {millions:.1f} M on this rank ({ctx.precision})",
        metrics,
    )


def forward(ctx: RankContext) -> Result:
    ledger = CollectiveLedger()
    started = time.perf_counter()
    with ledger:
        ctx.loss = model_module.loss_of(ctx, ctx.model)
    value = ctx.loss.item()
    elapsed = time.perf_counter() - started
    ctx.collectives["forward"] = ledger.as_dict()
    ctx.first_step_s = elapsed
    metrics = {"loss": value, "forward_s": round(elapsed, 4), "collectives": ledger.as_dict()}
    if not math.isfinite(value):
        return Result(
            "forward",
            FAIL,
            f"the loss is {value}, not finite: the card computes wrong results; run dcgmi diag -r 2",
            metrics,
        )
    return Result("forward", PASS, f"loss {value:.4f} (finite)", metrics)


def backward(ctx: RankContext) -> Result:
    ledger = CollectiveLedger()
    started = time.perf_counter()
    loss = ctx.loss
    if loss is None:  # the forward check did not finish
        raise AttributeError("no loss to differentiate: the forward check did not compute one")
    with ledger:
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
    parameters = list(ctx.model.named_parameters())
    missing = [name for name, parameter in parameters if parameter.grad is None]
    grads = [local(parameter.grad) for _, parameter in parameters if parameter.grad is not None]
    nonfinite = sum(1 for grad in grads if grad.numel() and not bool(torch.isfinite(grad).all()))
    nonzero = sum(1 for grad in grads if grad.numel() and bool((grad != 0).any()))
    before = [local(parameter).detach().clone() for _, parameter in parameters]
    with ledger:
        ctx.optimizer.step()
        ctx.optimizer.zero_grad(set_to_none=True)
    ctx.synchronize()
    elapsed = time.perf_counter() - started
    ctx.first_step_s = (ctx.first_step_s or 0.0) + elapsed
    ctx.loss = None
    ctx.collectives["backward_and_step"] = ledger.as_dict()
    nonempty = [(old, local(parameter)) for old, (_, parameter) in zip(before, parameters, strict=True) if old.numel()]
    changed = sum(1 for old, new in nonempty if not torch.equal(old, new.detach()))
    metrics = {
        "parameters": len(parameters),
        "without_grad": len(missing),
        "nonfinite_grads": nonfinite,
        "nonzero_grads": nonzero,
        "changed_by_step": changed,
        "nonempty_local": len(nonempty),
        "backward_and_step_s": round(elapsed, 4),
        "collectives": ledger.as_dict(),
    }
    fix = "the card or its software computes wrong gradients: rerun, then run dcgmi diag -r 2"
    if missing:
        return Result(
            "backward", FAIL, f"{len(missing)} parameters got no gradient (first: {missing[0]}): {fix}", metrics
        )
    if nonfinite:
        return Result("backward", FAIL, f"{nonfinite} gradients hold NaN or inf: {fix}", metrics)
    if nonempty and nonzero == 0:
        return Result("backward", FAIL, f"every gradient is zero: {fix}", metrics)
    if nonempty and changed == 0:
        return Result("backward", FAIL, "the optimizer step changed no weight: check the optimizer", metrics)
    if changed < len(nonempty):
        return Result(
            "backward",
            WARN,
            f"the optimizer step left {len(nonempty) - changed} of {len(nonempty)} weight tensors unchanged",
            metrics,
        )
    return Result(
        "backward",
        PASS,
        f"gradients finite and non-zero, the optimizer step changed all {changed} local weight tensors",
        metrics,
    )

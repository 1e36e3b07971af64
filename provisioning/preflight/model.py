"""The model under test: a small transformer-like MLP stack built in code (no download), fixed seed and batch.

Sharded with FSDP2 (`fully_shard` on a 1-D DeviceMesh, each block then the root) when the profile says
`shard`, plain replicated (DistributedDataParallel) otherwise. The precision is fixed: bf16 compute on
cards that support it (FSDP2's MixedPrecisionPolicy, or autocast when replicated), fp32 on CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from provisioning.preflight.context import RankContext

SEED = 1234
LEARNING_RATE = 1e-3
# Bytes per parameter of training state: fp32 weights and gradients, AdamW's two moments (4 + 4 + 8), plus a
# 16-bit working copy (FSDP2's all-gathered compute weights, or DDP's gradient buckets) counted whole.
STATE_BYTES_PER_PARAMETER = 16
WORKING_COPY_BYTES_PER_PARAMETER = 4
INJECTED_OOM = "CUDA out of memory. Tried to allocate 2.00 GiB (TEST ONLY: --inject oom-in-forward)"


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        update: torch.Tensor = self.down(F.gelu(self.up(self.norm(h))))
        return h + update


class PreflightModel(nn.Module):
    def __init__(self, *, vocab: int, dim: int, layers: int, hidden: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, hidden) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self.oom_at_block: int | None = None  # test-only fault (--inject oom-in-forward)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # Flatten first: a Linear on 3-D input returns a view, which FSDP2 warns about.
        h = self.embed(tokens.reshape(-1))
        for index, block in enumerate(self.blocks):
            if index == self.oom_at_block:  # after the earlier blocks' all-gathers: the other ranks are in the next
                raise torch.OutOfMemoryError(INJECTED_OOM)
            h = block(h)
        logits: torch.Tensor = self.head(self.norm(h))
        return logits


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a tensor: the local shard of a DTensor, the tensor itself otherwise."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


def parameter_count(config: dict[str, int]) -> int:
    """PreflightModel's parameters, from its configuration (as `sum(p.numel() ...)` would count them)."""
    vocab, dim, hidden, layers = config["vocab"], config["dim"], config["hidden"], config["layers"]
    block = 2 * dim + dim * hidden + hidden + hidden * dim + dim  # norm, up, down
    return vocab * dim + layers * block + 2 * dim + dim * vocab + vocab  # embed, blocks, norm, head


def activation_bytes_per_token(config: dict[str, int], element_bytes: int) -> int:
    """What one token keeps for the backward pass: each block's inputs to its norm, up and down projections
    (2 x dim + 2 x hidden values), and the logits at the loss's peak (the fp32 log-softmax it keeps, its
    gradient in and out, the 16-bit gradient: 14 bytes per vocabulary entry)."""
    blocks = config["layers"] * (2 * config["dim"] + 2 * config["hidden"]) * element_bytes
    return blocks + 14 * config["vocab"] + 8 * config["dim"]


def estimated_peak_bytes(config: dict[str, int], *, batch: int, shards: int, element_bytes: int) -> int:
    """An estimate of one card's peak in a training step (an upper bound in practice: the working copy is
    counted whole)."""
    parameters = parameter_count(config)
    state = STATE_BYTES_PER_PARAMETER * parameters // shards + WORKING_COPY_BYTES_PER_PARAMETER * parameters
    return state + batch * config["seq"] * activation_bytes_per_token(config, element_bytes)


def sized_batch(config: dict[str, int], *, capacity: int, target: float | None, shards: int, element_bytes: int) -> int:
    """The batch per card that makes a step peak near `target` x capacity; never below the profile's batch.

    A model that peaks at 5 % of a 180 GB card cannot show a broken split: sized to about half the card, the
    card that got everything would need twice that.
    """
    if target is None:
        return config["batch"]
    fixed = estimated_peak_bytes(config, batch=0, shards=shards, element_bytes=element_bytes)
    per_sample = config["seq"] * activation_bytes_per_token(config, element_bytes)
    return max(config["batch"], int((target * capacity - fixed) // per_sample))


def build(ctx: RankContext) -> dict[str, Any]:
    """Build, move to the card, shard or replicate; set ctx.model, ctx.optimizer, ctx.batch. Returns metrics."""
    config = ctx.settings.model
    shards = ctx.world_size if ctx.settings.shard else 1
    element_bytes = 2 if ctx.dtype == torch.bfloat16 else 4
    capacity = torch.cuda.get_device_properties(ctx.device).total_memory if ctx.is_cuda else None
    target = ctx.settings.memory_target if ctx.is_cuda else None
    ctx.batch_size = sized_batch(
        config, capacity=capacity or 0, target=target, shards=shards, element_bytes=element_bytes
    )
    torch.manual_seed(SEED)  # the same initial weights on every rank, before sharding
    with torch.device(ctx.device):
        model = PreflightModel(
            vocab=config["vocab"], dim=config["dim"], layers=config["layers"], hidden=config["hidden"]
        )
    total = sum(parameter.numel() for parameter in model.parameters())
    if ctx.injected("oom-in-forward"):
        model.oom_at_block = len(model.blocks) - 1
    wrapped: nn.Module = model  # FSDP2 shards the model in place; DDP wraps it
    if ctx.settings.shard:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        ctx.mesh = init_device_mesh(ctx.device_type, (ctx.world_size,), mesh_dim_names=("fsdp",))
        policy = MixedPrecisionPolicy()
        if ctx.dtype == torch.bfloat16:
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.blocks:
            fully_shard(block, mesh=ctx.mesh, mp_policy=policy)
        fully_shard(model, mesh=ctx.mesh, mp_policy=policy)
        strategy = "FSDP2 fully_shard: each block, then the root; parameters Shard(0) over the mesh"
    else:
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.is_cuda else None)
        strategy = "replicated: DistributedDataParallel, gradients all-reduced"
    ctx.model = wrapped
    ctx.optimizer = torch.optim.AdamW(wrapped.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    ctx.batch = make_batch(ctx)
    local_parameters = sum(local(parameter).numel() for parameter in wrapped.parameters())
    local_bytes = sum(local(parameter).numel() * parameter.element_size() for parameter in wrapped.parameters())
    return {
        "strategy": strategy,
        "sharded": ctx.settings.shard,
        "mesh": {"device_type": ctx.device_type, "shape": [ctx.world_size], "dim_names": ["fsdp"]}
        if ctx.settings.shard
        else None,
        "parameters_total": total,
        "parameters_local": local_parameters,
        "parameter_bytes_local": local_bytes,
        "parameter_tensors": sum(1 for _ in wrapped.parameters()),
        "precision": ctx.precision,
        "config": dict(config),
        "batch_per_rank": ctx.batch_size,
        "batch_sized_for": None
        if target is None
        else {
            "memory_target": target,
            "capacity_bytes": capacity,
            "estimated_peak_bytes": estimated_peak_bytes(
                config, batch=ctx.batch_size, shards=shards, element_bytes=element_bytes
            ),
        },
    }


def sharding_problem(ctx: RankContext, metrics: dict[str, Any]) -> str | None:
    """Why the model is not split as the profile asked, or None."""
    if not ctx.settings.shard or ctx.world_size == 1:
        return None
    from torch.distributed.tensor import DTensor

    plain = [name for name, parameter in ctx.model.named_parameters() if not isinstance(parameter, DTensor)]
    if plain:
        return f"{len(plain)} parameters are not sharded (first: {plain[0]})"
    expected = metrics["parameters_total"] / ctx.world_size
    if metrics["parameters_local"] > 1.05 * expected + 1024:
        return f"this card holds {metrics['parameters_local']} parameters, expected about {int(expected)}"
    return None


def make_batch(ctx: RankContext) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed batch per rank (data parallel: each rank its own), next-token targets."""
    config = ctx.settings.model
    generator = torch.Generator().manual_seed(SEED + 1 + ctx.rank)
    tokens = torch.randint(config["vocab"], (ctx.batch_size, config["seq"] + 1), generator=generator)
    return tokens[:, :-1].contiguous().to(ctx.device), tokens[:, 1:].contiguous().to(ctx.device)


def precision_context(ctx: RankContext) -> contextlib.AbstractContextManager[object]:
    """Autocast for the replicated model on bf16 cards; FSDP2 casts through its MixedPrecisionPolicy."""
    if ctx.dtype == torch.bfloat16 and not ctx.settings.shard:
        return torch.autocast(ctx.device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def loss_of(ctx: RankContext, model: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The loss of the fixed batch under `model`: the module itself, or what torch.compile made of it."""
    if ctx.batch is None:  # build sets it
        raise TypeError("no batch: model.build did not run")
    tokens, targets = ctx.batch
    with precision_context(ctx):
        logits = model(tokens)
    return F.cross_entropy(logits.float(), targets.reshape(-1))


def train_step(ctx: RankContext, model: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """One full step: forward, backward, optimizer step. Returns the loss (not synchronised)."""
    loss = loss_of(ctx, model)
    loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
    ctx.optimizer.step()
    ctx.optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def tokens_per_step(ctx: RankContext) -> int:
    return ctx.batch_size * ctx.settings.model["seq"] * ctx.world_size

"""`checkpoint_write`, `checkpoint_restore`: a sharded DCP save, the weights perturbed, a load, bitwise equal.

Every model and optimizer tensor this rank holds (its local shards) is compared byte for byte with what was
saved; the report counts the mismatches. The weights are perturbed through `to_local()` (random ops on
DTensors over a CPU mesh are a pitfall), and the perturbation is counted too: a restore that compares
unchanged tensors would prove nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from provisioning.preflight.collectives import CollectiveLedger
from provisioning.preflight.context import RankContext
from provisioning.preflight.model import local
from provisioning.preflight.report import FAIL, PASS, Result, merge_ranks, ranks_phrase

FIX = "check the checkpoint disk (dmesg, smartctl, free space) and the filesystem before hand-over"


def state(ctx: RankContext) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(ctx.model, ctx.optimizer)
    return {"model": model_state, "optim": optimizer_state}


def flatten(tree: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor of a nested state dict by its dotted path."""
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    items: dict[str, torch.Tensor] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            items.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(tree, list | tuple):
        for index, value in enumerate(tree):
            items.update(flatten(value, f"{prefix}.{index}"))
    return items


def local_copy(tensor: torch.Tensor) -> torch.Tensor:
    return local(tensor).detach().clone()


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    as_bytes = [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in (a, b)]
    return torch.equal(*as_bytes)


def rank_files(folder: Path, rank: int) -> list[dict[str, Any]]:
    """The shard files this rank wrote (DCP names them `__<rank>_<n>.distcp`); rank 0 adds `.metadata`."""
    paths = sorted(folder.glob(f"__{rank}_*.distcp"))
    if rank == 0 and (folder / ".metadata").exists():
        paths.append(folder / ".metadata")
    return [{"file": path.name, "bytes": path.stat().st_size} for path in paths]


def write(ctx: RankContext) -> Result:
    import torch.distributed.checkpoint as dcp

    ctx.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    saved = state(ctx)
    ctx.snapshot = {key: local_copy(tensor) for key, tensor in flatten(saved).items()}
    ledger = CollectiveLedger()
    started = time.perf_counter()
    with ledger:
        dcp.save(saved, checkpoint_id=str(ctx.checkpoint_dir))
    ctx.synchronize()
    elapsed = time.perf_counter() - started
    files = rank_files(ctx.checkpoint_dir, ctx.rank)
    ctx.collectives["checkpoint_write"] = ledger.as_dict()
    metrics = {
        "tensors": len(ctx.snapshot),
        "files": files,
        "bytes_written": sum(entry["bytes"] for entry in files if entry["file"].endswith(".distcp")),
        "save_s": round(elapsed, 4),
        "collectives": ledger.as_dict(),
    }
    if not any(entry["file"].endswith(".distcp") for entry in files) and ctx.snapshot:
        return Result(
            "checkpoint_write", FAIL, f"this rank wrote no shard file in {ctx.checkpoint_dir}: {FIX}", metrics
        )
    names = ", ".join(entry["file"] for entry in files)
    return Result("checkpoint_write", PASS, f"{len(ctx.snapshot)} tensors saved, files: {names}", metrics)


def corrupt_own_shard(ctx: RankContext) -> str:
    """Test-only fault (--inject corrupt-checkpoint): flip 4 KiB in the middle of this rank's shard file."""
    target = sorted(ctx.checkpoint_dir.glob(f"__{ctx.rank}_*.distcp"))[0]
    data = bytearray(target.read_bytes())
    middle = len(data) // 2
    for index in range(middle, min(len(data), middle + 4096)):
        data[index] ^= 0xFF
    target.write_bytes(bytes(data))
    return target.name


def chunk_offset(tensor: torch.Tensor) -> tuple[int, ...] | None:
    """Where this rank's part of the tensor starts, as DCP indexes chunks (a DTensor's local shard)."""
    create = getattr(tensor, "__create_chunk_list__", None)
    if callable(create):
        chunks = create()
        return tuple(chunks[0].offsets) if chunks else None
    return (0,) * tensor.dim()


def files_holding(folder: Path, chunks: dict[str, tuple[int, ...] | None]) -> list[str]:
    """The shard files DCP's metadata says hold these chunks (best effort: [] when unreadable)."""
    try:
        from torch.distributed.checkpoint import FileSystemReader

        storage = FileSystemReader(str(folder)).read_metadata().storage_data
        return sorted(
            {
                info.relative_path
                for index, info in storage.items()
                if index.fqn in chunks and chunks[index.fqn] in (None, tuple(index.offset or ()))
            }
        )
    except Exception:  # the metadata itself may be what is corrupted
        return []


def perturb(ctx: RankContext) -> None:
    """Change every weight and optimizer tensor of this rank, through its local shard."""
    with torch.no_grad():
        for parameter in ctx.model.parameters():
            local(parameter).add_(1)
        for per_parameter in ctx.optimizer.state.values():
            for value in per_parameter.values():
                if isinstance(value, torch.Tensor):
                    local(value).add_(1)


def restore(ctx: RankContext) -> Result:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import set_state_dict

    saved_count = len(ctx.snapshot or {})
    metrics: dict[str, Any] = {"tensors": saved_count}
    if ctx.injected("corrupt-checkpoint"):
        metrics["injected_corruption"] = corrupt_own_shard(ctx)
    dist.barrier()  # every rank reads after the (test-only) corruption, never during it
    perturb(ctx)
    current = flatten(state(ctx))
    snapshot = ctx.snapshot
    if snapshot is None:  # checkpoint_write saved nothing to compare with
        raise AttributeError("no snapshot to compare with: checkpoint_write did not save one")
    metrics["perturbed"] = sum(
        1 for key, saved in snapshot.items() if key in current and not bitwise_equal(saved, local(current[key]))
    )
    ledger = CollectiveLedger()
    started = time.perf_counter()
    try:
        with ledger:
            target = state(ctx)
            dcp.load(target, checkpoint_id=str(ctx.checkpoint_dir))
            set_state_dict(ctx.model, ctx.optimizer, model_state_dict=target["model"], optim_state_dict=target["optim"])
        ctx.synchronize()
    except CheckpointException as exc:
        failed = sorted(exc.failures)
        first = next(iter(exc.failures.values()))[0]
        metrics["failed_ranks"] = failed
        reason = f"{type(first).__name__}: {first}".splitlines()[0]
        return Result("checkpoint_restore", FAIL, f"loading the checkpoint raised {reason}: {FIX}", metrics)
    except Exception as exc:  # a failed load on this rank alone
        metrics["failed_ranks"] = [ctx.rank]
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return Result("checkpoint_restore", FAIL, f"loading the checkpoint raised {reason}: {FIX}", metrics)
    metrics["load_s"] = round(time.perf_counter() - started, 4)
    ctx.collectives["checkpoint_restore"] = ledger.as_dict()
    metrics["collectives"] = ledger.as_dict()
    restored = flatten(state(ctx))
    mismatched = [
        key for key, saved in snapshot.items() if key not in restored or not bitwise_equal(saved, local(restored[key]))
    ]
    mismatched += [key for key in restored if key not in snapshot]
    metrics["mismatches"] = len(mismatched)
    metrics["mismatched"] = mismatched[:10]
    chunks = {key: chunk_offset(restored[key]) for key in mismatched if key in restored}
    metrics["mismatched_files"] = files_holding(ctx.checkpoint_dir, chunks) if mismatched else []
    ctx.snapshot = None  # a full copy of this rank's state: not part of the workload's memory peak
    if mismatched:
        return Result(
            "checkpoint_restore",
            FAIL,
            f"{len(mismatched)} of {saved_count} tensors differ after the restore (first: {mismatched[0]},"
            f" read from {', '.join(metrics['mismatched_files']) or 'an unknown file'}):"
            f" the checkpoint does not restore bitwise; {FIX}",
            metrics,
        )
    if saved_count and metrics["perturbed"] == 0:
        return Result("checkpoint_restore", FAIL, "the perturbation changed no tensor, so nothing was proven", metrics)
    return Result(
        "checkpoint_restore",
        PASS,
        f"0 mismatches: all {saved_count} model and optimizer tensors bitwise equal after the restore",
        metrics,
    )


def merge(ctx: RankContext, results: list[Result]) -> Result:
    """Name the rank whose shard failed to load, not every rank that the collective load aborted."""
    merged = merge_ranks("checkpoint_restore", results)
    merged.metrics["mismatches"] = sum(result.metrics.get("mismatches", 0) for result in results)
    merged.metrics["tensors"] = sum(result.metrics.get("tensors", 0) for result in results)
    if merged.status != FAIL:
        return merged
    blamed = sorted({rank for result in results for rank in result.metrics.get("failed_ranks", [])})
    if not blamed:  # mismatches: merge_ranks already names each failing rank with its own count
        return merged
    detail = next(result.detail for result in results if result.status == FAIL)
    merged.detail = f"checkpoint_restore failed on {ranks_phrase(blamed)}: {detail}"
    return merged

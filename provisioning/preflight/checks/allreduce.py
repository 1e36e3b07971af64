"""`allreduce`: a fixed-size all-reduce is correct on every rank and fast enough, nccl-tests style.

Rank r contributes r + 1 everywhere; every rank must end with n(n+1)/2 everywhere. Each rank also checks
its own contribution before sending it, so a wrong sum names the rank that sent wrong data, not only the
ranks that received it. Bandwidth follows nccl-tests: algbw = size / time, busbw = algbw x 2(n-1)/n, with
the time of the slowest rank; on GPUs busbw must reach `busbw_floor_gbps`: 0.9 x the card's measured figure
(cards.py; B200 670 GB/s, H100/H200 365 GB/s), or 0.9 x this node's own nccl-tests result when
`all_reduce_perf` is installed (nccl_tests.py). Those are 8-GPU-ring-derived or two-card figures; a card
without a figure gets the measurement recorded with a warning.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from provisioning.preflight.collectives import CollectiveLedger
from provisioning.preflight.context import RankContext
from provisioning.preflight.report import FAIL, PASS, WARN, Result, merge_ranks, ranks_phrase


def bus_bandwidth(algbw: float, world_size: int) -> float:
    return algbw * 2 * (world_size - 1) / world_size


def run(ctx: RankContext) -> Result:
    config = ctx.settings.allreduce
    numel = max(1, config["bytes"] // 4)
    own = float(ctx.rank + 1)
    expected = ctx.world_size * (ctx.world_size + 1) / 2
    buffer = torch.full((numel,), own, dtype=torch.float32, device=ctx.device)
    if ctx.injected("wrong-allreduce"):
        buffer[: max(1, numel // 4)] += 0.5  # test-only fault: this rank contributes a wrong value
    wrong_in = int((buffer != own).sum().item())
    ctx.synchronize()
    dist.barrier()
    ledger = CollectiveLedger()
    with ledger:
        dist.all_reduce(buffer)
    ctx.synchronize()
    wrong_out = int((buffer != expected).sum().item())
    first_value = buffer[0].item()
    ctx.collectives["allreduce"] = ledger.as_dict()
    for _ in range(config["warmup"]):
        dist.all_reduce(buffer)
    ctx.synchronize()
    dist.barrier()
    iterations = max(1, config["iters"])
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(buffer)
    ctx.synchronize()
    elapsed = (time.perf_counter() - started) / iterations
    del buffer
    if ctx.is_cuda:
        torch.cuda.empty_cache()
    metrics = {
        "bytes": numel * 4,
        "dtype": "float32",
        "contributed": own,
        "expected": expected,
        "first_value": first_value,
        "wrong_contributed": wrong_in,
        "wrong_result": wrong_out,
        "iterations": iterations,
        "time_s": elapsed,
    }
    status = FAIL if wrong_in or wrong_out else PASS
    return Result("allreduce", status, "", metrics)


def merge(ctx: RankContext, results: list[Result]) -> Result:
    if any("time_s" not in result.metrics for result in results):
        return merge_ranks("allreduce", results)  # a rank raised: its detail says what
    first = results[0].metrics
    size, n = first["bytes"], len(results)
    slowest = max(result.metrics["time_s"] for result in results)
    # One rank moves nothing between cards: a bandwidth from its timing is a meaningless figure (the H200 run
    # printed 294,929 GB/s), so none is reported.
    algbw = size / slowest / 1e9 if n > 1 else None
    busbw = bus_bandwidth(algbw, n) if algbw is not None else None
    floor = ctx.settings.thresholds.get("busbw_floor_gbps")
    applies = ctx.is_cuda and n > 1 and floor is not None
    source = ctx.settings.threshold_sources.get("busbw_floor_gbps")
    metrics: dict[str, Any] = {
        "bytes": size,
        "world_size": n,
        "time_s": round(slowest, 6),
        "algbw_gbps": None if algbw is None else round(algbw, 3),
        "busbw_gbps": None if busbw is None else round(busbw, 3),
        "busbw_floor_gbps": floor if applies else None,
        "busbw_floor_source": source if applies else None,
        "correct_on_every_rank": all(result.status == PASS for result in results),
        "ranks": [result.metrics for result in results],
    }
    senders = [rank for rank, result in enumerate(results) if result.metrics["wrong_contributed"]]
    receivers = [rank for rank, result in enumerate(results) if result.metrics["wrong_result"]]
    if senders:
        sent = "; ".join(
            f"rank {rank} sent {results[rank].metrics['wrong_contributed']} of {size // 4} elements"
            f" different from {results[rank].metrics['contributed']}"
            for rank in senders
        )
        return Result(
            "allreduce",
            FAIL,
            f"allreduce failed on {ranks_phrase(senders)}: {sent}, so the sum was wrong on"
            f" {ranks_phrase(receivers) or 'no rank'} (first element {first['first_value']}, expected"
            f" {first['expected']}): take the card on {ranks_phrase(senders)} out of service and run"
            f" dcgmi diag -r 3 on it",
            metrics,
        )
    if receivers:
        got = ", ".join(f"rank {rank}: first element {results[rank].metrics['first_value']}" for rank in receivers)
        return Result(
            "allreduce",
            FAIL,
            f"allreduce failed on {ranks_phrase(receivers)}: every rank sent correct data but the sum arrived wrong"
            f" ({got}, expected {first['expected']}): data is corrupted between the cards; check NVLink"
            f" (nvidia-smi nvlink --status) and run nccl-tests all_reduce_perf",
            metrics,
        )
    if busbw is None:
        cost = f"{size / 2**20:.1f} MiB on one rank: no bandwidth measured (nothing crosses between cards)"
    else:
        cost = f"{size / 2**20:.1f} MiB in {slowest * 1e3:.2f} ms: algbw {algbw:.2f} GB/s, busbw {busbw:.2f} GB/s"
    if applies and busbw is not None and floor is not None and busbw < floor:
        return Result(
            "allreduce",
            FAIL,
            f"allreduce failed on {ranks_phrase(list(range(n)))}: busbw {busbw:.1f} GB/s is below the floor"
            f" {floor} GB/s ({cost}; floor from {source}): check `nvidia-smi nvlink --status` (every link"
            " active), `nvidia-smi topo -m` (NV# between the cards) and NCCL_P2P_DISABLE / NCCL_* settings",
            metrics,
        )
    unknown = ctx.settings.missing_figure("busbw_floor_gbps") if ctx.is_cuda and n > 1 else None
    if unknown:
        return Result("allreduce", WARN, f"correct on every rank; {cost}; no floor: {unknown}", metrics)
    below_card = ctx.settings.threshold_sources.get("busbw_below_card") if applies else None
    if below_card:
        return Result("allreduce", WARN, f"correct on every rank; {cost}, over the floor; but {below_card}", metrics)
    rule = f"floor {floor} GB/s" if applies else "no floor on cpu" if not ctx.is_cuda else "no floor for one card"
    return Result("allreduce", PASS, f"correct on every rank; {cost} ({rule})", metrics)

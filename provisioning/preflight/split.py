"""The `split` section: how the model was divided over the cards, as a customer is asked to document it.

Built from the checks' metrics: the mesh and parameters per card (`load`), the collectives one training step
issued as observed at the dispatcher (`forward`, `backward`), the checkpoint's collectives and files per
card (`checkpoint_write`, `checkpoint_restore`), and the measured all-reduce cost (`allreduce`).
"""

from __future__ import annotations

from typing import Any

from provisioning.preflight.report import Result


def per_rank(result: Result | None) -> list[dict[str, Any]]:
    if result is None:
        return []
    ranks = result.metrics.get("ranks")
    return ranks if isinstance(ranks, list) else []


def build(results: dict[str, Result], world_size: int) -> dict[str, Any] | None:
    if world_size < 2:
        return None
    load = per_rank(results.get("load"))
    if not load or "parameters_local" not in load[0]:
        return {"documented": False, "reason": "the model did not load"}
    first = load[0]
    split: dict[str, Any] = {
        "documented": True,
        "strategy": first["strategy"],
        "mesh": first["mesh"],
        "precision": first["precision"],
        "parameters_total": first["parameters_total"],
        "parameters_per_card": [
            {"rank": rank, "parameters": entry.get("parameters_local"), "bytes": entry.get("parameter_bytes_local")}
            for rank, entry in enumerate(load)
        ],
    }
    forward, backward = per_rank(results.get("forward")), per_rank(results.get("backward"))
    write, restore = per_rank(results.get("checkpoint_write")), per_rank(results.get("checkpoint_restore"))
    collectives: dict[str, Any] = {}
    if forward and backward:
        collectives["train_step"] = combine(forward[0].get("collectives", {}), backward[0].get("collectives", {}))
    if write:
        collectives["checkpoint_write"] = write[0].get("collectives", {})
    if restore:
        collectives["checkpoint_restore"] = restore[0].get("collectives", {})
    allreduce = results.get("allreduce")
    if allreduce is not None and "busbw_gbps" in allreduce.metrics:
        collectives["allreduce"] = {
            key: allreduce.metrics[key] for key in ("bytes", "time_s", "algbw_gbps", "busbw_gbps")
        }
    step_time = results.get("step_time")
    if step_time is not None and "steady_median_s" in step_time.metrics:
        collectives["train_step_time_s"] = step_time.metrics["steady_median_s"]
    collectives["observed_on"] = "rank 0; every rank issues the same collectives"
    split["collectives"] = collectives
    split["checkpoint_files_per_card"] = [
        {"rank": rank, "files": entry.get("files", [])} for rank, entry in enumerate(write)
    ]
    return split


def combine(*ledgers: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    total: dict[str, dict[str, int]] = {}
    for ledger in ledgers:
        for name, entry in (ledger or {}).items():
            into = total.setdefault(name, {"count": 0, "bytes": 0})
            into["count"] += entry["count"]
            into["bytes"] += entry["bytes"]
    return total

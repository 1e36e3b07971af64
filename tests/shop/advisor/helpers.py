"""Fit advisor test helpers: the requests of the hand-computed cases."""

from __future__ import annotations

from shop.advisor import FitRequest

GB = 10**9


def recipe(parameters: int, **changes) -> FitRequest:
    """BF16 mixed precision with AdamW (FP32 states), 4,096 tokens, one sequence per card, checkpointing on."""
    fields = {
        "parameters": parameters,
        "precision": "bf16_mixed",
        "optimizer": "adamw",
        "sequence_length": 4096,
        "micro_batch_size": 1,
        "activation_checkpointing": True,
        "strategy": "data_parallel",
        **changes,
    }
    return FitRequest(**fields)


def as_query(request: FitRequest, **changes) -> dict[str, str]:
    """The page's GET parameters for a request (the size written out in full)."""
    query = {
        "parameters": str(request.parameters),
        "parameters_unit": "1",
        "precision": request.precision,
        "optimizer": request.optimizer,
        "sequence_length": str(request.sequence_length),
        "micro_batch_size": str(request.micro_batch_size),
        "hidden_size": "" if request.hidden_size is None else str(request.hidden_size),
        "layers": "" if request.layers is None else str(request.layers),
        "strategy": request.strategy,
    }
    if request.activation_checkpointing:
        query["activation_checkpointing"] = "on"
    return {**query, **changes}

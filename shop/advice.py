"""The fit advisor's answer: the arithmetic (shop.advisor) and its words (shop.advisor_text) put together
for the lot the shop sells."""

from __future__ import annotations

from typing import TypedDict

from orders.models import LotSpec
from shop.advisor import (
    H200_MEMORY_GB,
    Advice,
    FitRequest,
    MemoryPerCard,
    Strategy,
    Verdict,
    cards_needed_sharded,
    fit_verdict,
    lots_recommended,
    memory_per_card,
    model_shape,
    usable_gb,
)
from shop.advisor_text import advice_message, advice_notes, advice_title, formula_rows, usable_formula


class MessageContext(TypedDict):
    """The figures `advice_message` words the verdict with (its keyword arguments)."""

    gpu_model: str
    card_memory_gb: int
    cards_per_lot: int
    usable: float
    one_copy: MemoryPerCard
    sharded: MemoryPerCard
    h200_fits: bool
    cards_needed: int | None


def fit_advice(request: FitRequest, *, gpu_model: str, card_memory_gb: int, cards_per_lot: int) -> Advice:
    """The estimate for both strategies, the verdict and its words, for a lot of `cards_per_lot` cards."""
    shape = model_shape(request.parameters, request.hidden_size, request.layers)
    one_copy = memory_per_card(request, shape, shards=1)
    sharded = memory_per_card(request, shape, shards=cards_per_lot)
    usable = usable_gb(card_memory_gb)
    verdict = fit_verdict(one_copy_gb=one_copy.total, sharded_gb=sharded.total, usable_per_card_gb=usable)
    shards = cards_per_lot if request.strategy == Strategy.SHARDED else 1
    per_card = sharded if shards > 1 else one_copy
    h200_fits = verdict == Verdict.FITS_ONE_CARD and one_copy.total <= usable_gb(H200_MEMORY_GB)
    rows = formula_rows(request, shape, per_card, shards=shards)
    context: MessageContext = {
        "gpu_model": gpu_model,
        "card_memory_gb": card_memory_gb,
        "cards_per_lot": cards_per_lot,
        "usable": usable,
        "one_copy": one_copy,
        "sharded": sharded,
        "h200_fits": h200_fits,
        "cards_needed": cards_needed_sharded(one_copy, usable),
    }
    return Advice(
        request=request,
        shape=shape,
        gpu_model=gpu_model,
        card_memory_gb=card_memory_gb,
        cards_per_lot=cards_per_lot,
        usable_gb=usable,
        per_card=per_card,
        one_copy=one_copy,
        sharded=sharded,
        verdict=verdict,
        title=advice_title(verdict, gpu_model=gpu_model),
        message=advice_message(verdict, request, **context),
        rows=rows,
        formulas=[row.formula for row in rows] + [usable_formula(card_memory_gb)],
        notes=advice_notes(request, shape),
        lots=lots_recommended(verdict),
        h200_fits=h200_fits,
    )


def advice_for_current_lot(request: FitRequest) -> Advice:
    """fit_advice for the lot the shop sells now (LotSpec: the card model, its memory, cards per lot)."""
    lot = LotSpec.current()
    return fit_advice(
        request, gpu_model=lot.gpu_model, card_memory_gb=lot.gpu_memory_gb, cards_per_lot=lot.gpus_per_lot
    )

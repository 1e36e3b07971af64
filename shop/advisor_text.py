"""The fit advisor's words: the formulas with the customer's numbers, the verdict in plain words, the notes.

Everything here is translated in the active language; shop.advisor does the arithmetic.
"""

from __future__ import annotations

from django.utils.translation import gettext as _

from shop.advisor import (
    ACTIVATION_VALUES_PER_LAYER,
    FRAMEWORK_OVERHEAD_GB,
    H200_MEMORY_GB,
    MI300X_MEMORY_GB,
    PRECISION_BYTES,
    USABLE_FRACTION,
    FitRequest,
    FormulaRow,
    MemoryPerCard,
    ModelShape,
    Optimizer,
    Precision,
    Strategy,
    Verdict,
    _n,
    optimizer_state_bytes,
    usable_gb,
)


def _gb(value: float) -> str:
    return _n(value, 1)


def _bytes(value: float) -> str:
    return _n(value) if float(value).is_integer() else _n(value, 4)


def _state_formula(label: str, per_parameter: float, detail: str, parameters: int, shards: int, gb: float) -> str:
    divide = f" ÷ {shards}" if shards > 1 else ""
    return _("%(label)s = P × %(bytes)s B (%(detail)s)%(divide)s = %(p)s × %(bytes)s B%(divide)s = %(gb)s GB") % {
        "label": label,
        "bytes": _bytes(per_parameter),
        "detail": detail,
        "divide": divide,
        "p": _n(parameters),
        "gb": _gb(gb),
    }


def _optimizer_detail(request: FitRequest, hidden_size: int) -> str:
    parts = []
    master = PRECISION_BYTES[Precision(request.precision)].master
    if master:
        parts.append(_("%(bytes)s B FP32 master weights") % {"bytes": master})
    if request.optimizer == Optimizer.ADAFACTOR:
        parts.append(
            _("8 / h = %(bytes)s B Adafactor factored second moments")
            % {"bytes": _bytes(optimizer_state_bytes(request.optimizer, hidden_size))}
        )
    else:
        state_words: dict[str, str] = {
            Optimizer.ADAMW: _("8 B AdamW m and v in FP32"),
            Optimizer.ADAMW_8BIT: _("2 B AdamW m and v in 8-bit"),
            Optimizer.SGD_MOMENTUM: _("4 B FP32 momentum"),
        }
        parts.append(state_words[request.optimizer])
    return " + ".join(parts)


def formula_rows(request: FitRequest, shape: ModelShape, memory: MemoryPerCard, *, shards: int) -> list[FormulaRow]:
    """Each part of the per-card memory with its formula, filled in with the request's numbers."""
    sizes = PRECISION_BYTES[Precision(request.precision)]
    optimizer_bytes = sizes.master + optimizer_state_bytes(request.optimizer, shape.hidden_size)
    p = request.parameters
    numbers = {
        "s": _n(request.sequence_length),
        "b": _n(request.micro_batch_size),
        "h": _n(shape.hidden_size),
        "L": _n(shape.layers),
        "k": ACTIVATION_VALUES_PER_LAYER,
        "A": sizes.activation,
        "gb": _gb(memory.activations),
        "label": _("activations"),
    }
    if request.activation_checkpointing:
        activations = _(
            "%(label)s = s × b × h × (L + %(k)s) × A = %(s)s × %(b)s × %(h)s × (%(L)s + %(k)s) × %(A)s B = %(gb)s GB"
        )
    else:
        activations = _(
            "%(label)s = s × b × h × L × %(k)s × A = %(s)s × %(b)s × %(h)s × %(L)s × %(k)s × %(A)s B = %(gb)s GB"
        )
    overhead = _(
        "%(label)s = %(gb)s GB, a fixed allowance (CUDA context, communication buffers, memory fragmentation)"
    ) % {"label": _("framework overhead"), "gb": _gb(FRAMEWORK_OVERHEAD_GB)}
    total = _(
        "%(label)s = weights + gradients + optimizer state + activations + overhead"
        " = %(w)s + %(g)s + %(o)s + %(a)s + %(x)s = %(total)s GB"
    ) % {
        "label": _("total per card"),
        "w": _gb(memory.weights),
        "g": _gb(memory.gradients),
        "o": _gb(memory.optimizer),
        "a": _gb(memory.activations),
        "x": _gb(memory.overhead),
        "total": _gb(memory.total),
    }
    return [
        FormulaRow(
            "weights",
            _("Weights"),
            memory.weights,
            _state_formula(_("weights"), sizes.weights, sizes.dtype, p, shards, memory.weights),
        ),
        FormulaRow(
            "gradients",
            _("Gradients"),
            memory.gradients,
            _state_formula(_("gradients"), sizes.gradients, sizes.dtype, p, shards, memory.gradients),
        ),
        FormulaRow(
            "optimizer",
            _("Optimizer state"),
            memory.optimizer,
            _state_formula(
                _("optimizer state"),
                optimizer_bytes,
                _optimizer_detail(request, shape.hidden_size),
                p,
                shards,
                memory.optimizer,
            ),
        ),
        FormulaRow("activations", _("Activations"), memory.activations, activations % numbers),
        FormulaRow("overhead", _("Framework overhead"), memory.overhead, overhead),
        FormulaRow("total", _("Total per card"), memory.total, total),
    ]


def usable_formula(card_memory_gb: int) -> str:
    return _("usable per card = %(percent)s %% × %(memory)s GB = %(usable)s GB (a safety margin)") % {
        "percent": _n(USABLE_FRACTION * 100),
        "memory": _n(card_memory_gb),
        "usable": _gb(usable_gb(card_memory_gb)),
    }


def advice_title(verdict: str, *, gpu_model: str) -> str:
    titles: dict[str, str] = {
        Verdict.FITS_ONE_CARD: _("Fits on one %(gpu)s"),
        Verdict.NEEDS_PAIR_SHARDED: _("Needs the pair of %(gpu)s cards, sharded"),
        Verdict.DOES_NOT_FIT_PAIR: _("Does not fit a pair of %(gpu)s cards"),
    }
    return titles[verdict] % {"gpu": gpu_model}


def advice_message(
    verdict: str,
    request: FitRequest,
    *,
    gpu_model: str,
    card_memory_gb: int,
    cards_per_lot: int,
    usable: float,
    one_copy: MemoryPerCard,
    sharded: MemoryPerCard,
    h200_fits: bool,
    cards_needed: int | None,
) -> str:
    """The recommendation in plain words, with the alternatives where they apply."""
    numbers = {
        "gpu": gpu_model,
        "memory": _n(card_memory_gb),
        "usable": _gb(usable),
        "one_copy": _gb(one_copy.total),
        "sharded": _gb(sharded.total),
        "cards": cards_per_lot,
    }
    if verdict == Verdict.FITS_ONE_CARD:
        sentences = [
            _(
                "This training fits on one %(gpu)s: about %(one_copy)s GB per card, within the %(usable)s GB we "
                "count as usable. A lot has %(cards)s cards: the second one sits idle unless you run data parallel "
                "(one copy of the model per card, each on different data), which speeds training up."
            )
        ]
        if request.strategy == Strategy.SHARDED:
            sentences.append(_("Sharding is not needed to make it fit; data parallelism is simpler and faster."))
        if h200_fits:
            sentences.append(
                _(
                    "If your job will only ever use one card, a single H200 SXM with %(h200)s GB may suit you "
                    "better: this estimate fits there too (%(h200_usable)s GB usable)."
                )
            )
    elif verdict == Verdict.NEEDS_PAIR_SHARDED:
        sentences = [
            _(
                "Too big for one %(gpu)s: a full copy needs about %(one_copy)s GB per card, more than the "
                "%(usable)s GB usable. Sharded across the lot's %(cards)s cards (FSDP or ZeRO-3) it needs about "
                "%(sharded)s GB per card, so one lot holds it."
            ),
            _(
                "Data parallelism alone will not do: each card would keep a full copy of the weights, gradients "
                "and optimizer state, and the two %(memory)s GB memories do not add up into one."
            ),
        ]
        if request.strategy == Strategy.DATA_PARALLEL:
            sentences.append(_("Set your training up to shard the model (FSDP or ZeRO-3) before you rent."))
    else:
        sentences = [
            _(
                "Too big even for a pair: sharded across %(cards)s cards it still needs about %(sharded)s GB per "
                "card, more than the %(usable)s GB usable on each %(gpu)s."
            ),
            _(
                "Ordering more lots does not pool their memory: each lot is a separate node, and only training "
                "sharded across nodes (multi-node FSDP, for example) would spread the model over them."
            ),
        ]
        if cards_needed is not None:
            numbers["needed"] = cards_needed
            sentences.append(_("By this estimate, that would take at least %(needed)s cards."))
        savings = _savings(request)
        if savings:
            numbers["savings"] = "; ".join(savings)
            sentences.append(_("To lower the estimate: %(savings)s."))
        sentences.append(
            _(
                "If very large memory per card matters and your project is ready for ROCm, an AMD MI300X with "
                "%(mi300x)s GB per card is another path."
            )
        )
    numbers |= {"h200": H200_MEMORY_GB, "h200_usable": _gb(usable_gb(H200_MEMORY_GB)), "mi300x": MI300X_MEMORY_GB}
    return " ".join(sentence % numbers for sentence in sentences)


def _savings(request: FitRequest) -> list[str]:
    savings = []
    if not request.activation_checkpointing:
        savings.append(_("turn on activation checkpointing"))
    if request.optimizer == Optimizer.ADAMW:
        savings.append(_("use AdamW 8-bit or Adafactor"))
    if request.micro_batch_size > 1:
        savings.append(_("use a smaller micro-batch per card"))
    return savings


def advice_notes(request: FitRequest, shape: ModelShape) -> list[str]:
    """How the estimate was made: the symbols, the derived shape, what is and is not counted."""
    sizes = PRECISION_BYTES[Precision(request.precision)]
    notes = [
        _(
            "P: parameters (%(p)s); s: sequence length; b: micro-batch per card; h: hidden size (%(h)s); "
            "L: layers (%(L)s); A: bytes per activation value (%(A)s); B: bytes; GB: 10⁹ bytes."
        )
        % {"p": _n(request.parameters), "h": _n(shape.hidden_size), "L": _n(shape.layers), "A": sizes.activation}
    ]
    derived = {
        (True, True): _("the hidden size and the number of layers"),
        (True, False): _("the hidden size"),
        (False, True): _("the number of layers"),
    }.get((shape.hidden_derived, shape.layers_derived))
    if derived:
        notes.append(
            _(
                "You did not give %(which)s, so we derived them from the parameter count with P ≈ 12 × L × h² "
                "(a dense transformer) and about one layer per 128 of hidden size: h = %(h)s, L = %(L)s."
            )
            % {"which": derived, "h": _n(shape.hidden_size), "L": _n(shape.layers)}
        )
    else:
        implied = 12 * shape.layers * shape.hidden_size**2
        if not 0.5 <= implied / request.parameters <= 2:
            notes.append(
                _(
                    "Your hidden size and layers describe about %(implied)s parameters (12 × L × h²), far from the "
                    "%(p)s you entered; the activations use your hidden size and layers."
                )
                % {"implied": _n(implied), "p": _n(request.parameters)}
            )
    if request.precision == Precision.FP8:
        notes.append(
            _(
                "FP8 is counted like BF16 mixed precision: FP8 training keeps BF16 weights and FP32 master "
                "weights; its FP8 copies and any activation savings are not counted."
            )
        )
    if request.precision == Precision.BF16:
        notes.append(_("Pure BF16 keeps no FP32 master copy; the optimizer state keeps the format you chose."))
    notes += [
        _(
            "Activations are counted for one micro-batch per card, with a fused (flash) attention that keeps no "
            "s × s score matrix: about %(k)s values per token, hidden unit and layer (Korthikanti et al., 2022). "
            "Sharding does not divide them: each card keeps its own micro-batch's activations."
        )
        % {"k": ACTIVATION_VALUES_PER_LAYER},
        _(
            "We count %(percent)s %% of each card as usable and add %(overhead)s GB per card for the framework. "
            "Output logits and temporary buffers are not counted: rehearse on a reduced dataset and record each "
            "card's peak memory before the campaign."
        )
        % {"percent": _n(USABLE_FRACTION * 100), "overhead": _gb(FRAMEWORK_OVERHEAD_GB)},
    ]
    return notes

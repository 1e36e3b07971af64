"""The fit advisor: how much memory each card needs to train a model, and what to rent for it.

Plain functions and constants; shop.advisor_views turns them into the /advisor/ page and the API.
Units: GB = 10^9 bytes, P = parameters. The card's capacity is the lot's (LotSpec.gpu_memory_gb, per card,
never pooled); only the alternative cards' capacities are constants here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, DecimalException

from django.db import models
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

GB = 10**9
MAX_PARAMETERS = 10**13  # exclusive: "below 10 trillion"
MIN_PLAIN_COUNT = 10**6  # a plain number this large is a count even when a unit is chosen
USABLE_FRACTION = 0.9  # safety margin: count 90 % of a card as usable (spikes, fragmentation)
FRAMEWORK_OVERHEAD_GB = 5.0  # per card, fixed: CUDA context, communication buffers, allocator fragmentation
H200_MEMORY_GB = 141  # H200 SXM, for the "one card is enough" hint
MI300X_MEMORY_GB = 192  # AMD MI300X, for ROCm-ready projects that need more memory per card
ACTIVATION_VALUES_PER_LAYER = 17  # per token and hidden unit: 34 bytes in 16-bit (Korthikanti et al., 2022)
HIDDEN_PER_LAYER = 128  # depth vs width of common dense transformers (4096 wide, 32 layers)
HIDDEN_ROUNDING = 256

# Inclusive ranges of the integer inputs, shared by the page's form and the API.
LIMITS = {
    "sequence_length": (1, 1_000_000),
    "micro_batch_size": (1, 65_536),
    "hidden_size": (64, 1_000_000),
    "layers": (1, 10_000),
}
LIMIT_MESSAGES = {
    "sequence_length": gettext_lazy("The sequence length must be between %(low)s and %(high)s tokens."),
    "micro_batch_size": gettext_lazy("The micro-batch size must be between %(low)s and %(high)s."),
    "hidden_size": gettext_lazy("The hidden size must be between %(low)s and %(high)s."),
    "layers": gettext_lazy("The number of layers must be between %(low)s and %(high)s."),
}


class Precision(models.TextChoices):
    FP32 = "fp32", gettext_lazy("FP32: weights, gradients and activations in 32-bit")
    BF16_MIXED = "bf16_mixed", gettext_lazy("BF16 mixed precision with FP32 master weights")
    BF16 = "bf16", gettext_lazy("Pure BF16, no FP32 master copy")
    FP8 = "fp8", gettext_lazy("FP8, counted like BF16 mixed precision")


class Optimizer(models.TextChoices):
    ADAMW = "adamw", gettext_lazy("AdamW, states in FP32")
    ADAMW_8BIT = "adamw_8bit", gettext_lazy("AdamW 8-bit")
    SGD_MOMENTUM = "sgd_momentum", gettext_lazy("SGD with momentum")
    ADAFACTOR = "adafactor", gettext_lazy("Adafactor")


class Strategy(models.TextChoices):
    DATA_PARALLEL = "data_parallel", gettext_lazy("One copy per card (data parallel)")
    SHARDED = "sharded", gettext_lazy("Sharded across the cards (FSDP / ZeRO-3)")


class ParameterUnit(models.TextChoices):
    BILLIONS = "B", gettext_lazy("billion (B)")
    MILLIONS = "M", gettext_lazy("million (M)")
    TRILLIONS = "T", gettext_lazy("trillion (T)")
    PARAMETERS = "1", gettext_lazy("parameters, as written")


class Verdict(models.TextChoices):
    FITS_ONE_CARD = "fits_one_card"
    NEEDS_PAIR_SHARDED = "needs_pair_sharded"
    DOES_NOT_FIT_PAIR = "does_not_fit_pair"


@dataclass(frozen=True)
class PrecisionBytes:
    """Bytes per parameter (weights, gradients, FP32 master copy) and per activation value."""

    weights: int
    gradients: int
    master: int
    activation: int
    dtype: str


PRECISION_BYTES = {
    Precision.FP32: PrecisionBytes(weights=4, gradients=4, master=0, activation=4, dtype="FP32"),
    Precision.BF16_MIXED: PrecisionBytes(weights=2, gradients=2, master=4, activation=2, dtype="BF16"),
    Precision.BF16: PrecisionBytes(weights=2, gradients=2, master=0, activation=2, dtype="BF16"),
    # FP8 training (e.g. Transformer Engine) keeps BF16 weights and FP32 master weights; FP8 copies are extra.
    Precision.FP8: PrecisionBytes(weights=2, gradients=2, master=4, activation=2, dtype="BF16"),
}
UNIT_FACTORS = {"1": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}


class AdvisorInputError(ValueError):
    """A bad input, with the field it belongs to and a message the customer can act on."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


_COUNT = re.compile(r"(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?P<exponent>e[+-]?\d+)?)(?P<suffix>[kmbgt]|bn)?", re.I)


def parse_parameter_count(text: str | int | float, unit: str = ParameterUnit.PARAMETERS) -> int:
    """The number of parameters from `7B`, `350M`, `1.5T`, `70e9`, `7,000,000,000` or a plain number.

    A suffix (K, M, B, T) or an exponent (70e9) says the size by itself; only a plain number is multiplied
    by `unit` (1, M, B or T), unless that would reach 10^13 and the number alone is a plausible count
    (at least a million): then it is read as written. A comma is a thousands separator in `7,000,000` and
    a decimal one in `1,5`; dots group thousands in `7.000.000.000`.
    Raises AdvisorInputError unless 0 < P < 10^13.
    """
    raw = re.sub(r"[\s_'\u00a0\u202f]", "", str(text))
    if not raw:
        raise AdvisorInputError("parameters", _("Enter the model size, for example 7B."))
    if "," in raw and ("." in raw or re.fullmatch(r"\d{1,3}(,\d{3})+[a-z]*", raw, re.I)):
        raw = raw.replace(",", "")
    elif re.fullmatch(r"\d{1,3}(\.\d{3}){2,}[a-z]*", raw, re.I):  # 7.000.000.000: dots group thousands
        raw = raw.replace(".", "")
    raw = raw.replace(",", ".")
    match = _COUNT.fullmatch(raw) if len(raw) <= 40 else None
    if match is None:
        raise AdvisorInputError("parameters", _("Enter a number of parameters, for example 7B, 350M or 70e9."))
    suffix = (match["suffix"] or "").upper()[:1]
    factor = UNIT_FACTORS[suffix] if suffix else 1 if match["exponent"] else UNIT_FACTORS.get(unit, 1)
    try:
        number = Decimal(match["number"])
        count = number * factor
    except DecimalException:
        number = count = Decimal(MAX_PARAMETERS)
    if not suffix and count >= MAX_PARAMETERS and MIN_PLAIN_COUNT <= number < MAX_PARAMETERS:
        count = number  # 7,000,000,000 "billion" cannot be meant: it is a count as written
    if count >= MAX_PARAMETERS:
        raise AdvisorInputError(
            "parameters", _("The number of parameters must be below 10 trillion (10T); check the unit.")
        )
    if round(count) < 1:
        raise AdvisorInputError("parameters", _("The number of parameters must be positive."))
    return int(round(count))


def check_limit(field: str, value: int) -> int:
    """`value` if it lies in LIMITS[field], else AdvisorInputError with the range in words."""
    low, high = LIMITS[field]
    if not low <= value <= high:
        raise AdvisorInputError(field, LIMIT_MESSAGES[field] % {"low": _n(low), "high": _n(high)})
    return value


@dataclass(frozen=True)
class FitRequest:
    parameters: int
    precision: str = Precision.BF16_MIXED
    optimizer: str = Optimizer.ADAMW
    sequence_length: int = 4096
    micro_batch_size: int = 1
    hidden_size: int | None = None
    layers: int | None = None
    activation_checkpointing: bool = False
    strategy: str = Strategy.DATA_PARALLEL


@dataclass(frozen=True)
class ModelShape:
    hidden_size: int
    layers: int
    hidden_derived: bool
    layers_derived: bool


def model_shape(parameters: int, hidden_size: int | None = None, layers: int | None = None) -> ModelShape:
    """Hidden size h and layers L, derived where not given, from P ≈ 12 × L × h² (a dense transformer:
    4h² of attention and 8h² of MLP per layer) and, when both are missing, L ≈ h / 128, so that
    h = (128 × P / 12)^(1/3) rounded to a multiple of 256, then L = P / (12 × h²) rounded.
    """
    hidden, depth = hidden_size, layers
    if hidden is None:
        if depth is None:
            hidden = max(HIDDEN_ROUNDING, round((HIDDEN_PER_LAYER * parameters / 12) ** (1 / 3) / 256) * 256)
        else:
            hidden = max(64, round(math.sqrt(parameters / (12 * depth)) / 64) * 64)
    if depth is None:
        depth = max(1, round(parameters / (12 * hidden**2)))
    return ModelShape(hidden, depth, hidden_derived=hidden_size is None, layers_derived=layers is None)


def optimizer_state_bytes(optimizer: str, hidden_size: int) -> float:
    """Bytes of optimizer state per parameter, FP32 master copy not included.

    AdamW: m and v in FP32 = 4 + 4 = 8. AdamW 8-bit: m and v in one byte each = 2 (block scales neglected).
    SGD with momentum: one FP32 buffer = 4. Adafactor (no momentum): factored second moments, one FP32 value
    per row and per column of each weight matrix = 4 × (rows + columns) / (rows × columns) ≈ 8 / h.
    """
    if optimizer == Optimizer.ADAFACTOR:
        return 8 / hidden_size
    state_bytes: dict[str, int] = {Optimizer.ADAMW: 8, Optimizer.ADAMW_8BIT: 2, Optimizer.SGD_MOMENTUM: 4}
    return state_bytes[optimizer]


def activation_bytes(
    *,
    sequence_length: int,
    micro_batch_size: int,
    hidden_size: int,
    layers: int,
    bytes_per_value: int,
    checkpointing: bool,
) -> int:
    """Activations kept for the backward pass of one micro-batch on one card.

    Without checkpointing: s × b × h × L × 17 × A (about 17 values per token, hidden unit and layer with a
    fused attention that stores no s × s scores). With checkpointing, each layer keeps only its input and one
    layer at a time is recomputed: s × b × h × (L + 17) × A. A = bytes per value (2 in BF16, 4 in FP32).
    """
    per_value = sequence_length * micro_batch_size * hidden_size * bytes_per_value
    if checkpointing:
        return per_value * (layers + ACTIVATION_VALUES_PER_LAYER)
    return per_value * layers * ACTIVATION_VALUES_PER_LAYER


@dataclass(frozen=True)
class MemoryPerCard:
    """GB on each card."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    overhead: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.overhead

    def as_dict(self) -> dict[str, float]:
        parts = ("weights", "gradients", "optimizer", "activations", "overhead", "total")
        return {part: round(getattr(self, part), 2) for part in parts}


def memory_per_card(request: FitRequest, shape: ModelShape, *, shards: int) -> MemoryPerCard:
    """Weights, gradients and optimizer state divided over `shards` cards (1: a full copy per card), plus
    activations and the fixed overhead, which sharding does not divide:

    weights = P × w / n, gradients = P × g / n, optimizer = P × (m + o) / n, with w, g, m (master copy) from
    PRECISION_BYTES and o from optimizer_state_bytes; activations from activation_bytes.
    """
    sizes = PRECISION_BYTES[Precision(request.precision)]
    optimizer_bytes = sizes.master + optimizer_state_bytes(request.optimizer, shape.hidden_size)
    activations = activation_bytes(
        sequence_length=request.sequence_length,
        micro_batch_size=request.micro_batch_size,
        hidden_size=shape.hidden_size,
        layers=shape.layers,
        bytes_per_value=sizes.activation,
        checkpointing=request.activation_checkpointing,
    )
    per_card = request.parameters / shards / GB
    return MemoryPerCard(
        weights=per_card * sizes.weights,
        gradients=per_card * sizes.gradients,
        optimizer=per_card * optimizer_bytes,
        activations=activations / GB,
        overhead=FRAMEWORK_OVERHEAD_GB,
    )


def usable_gb(card_memory_gb: float) -> float:
    """usable = 90 % × the card's memory."""
    return card_memory_gb * USABLE_FRACTION


def fit_verdict(*, one_copy_gb: float, sharded_gb: float, usable_per_card_gb: float) -> str:
    """fits_one_card when a full copy fits one card, needs_pair_sharded when only the lot's cards sharded
    hold it, does_not_fit_pair otherwise. Totals are GB per card, compared with the usable GB."""
    if one_copy_gb <= usable_per_card_gb:
        return Verdict.FITS_ONE_CARD
    if sharded_gb <= usable_per_card_gb:
        return Verdict.NEEDS_PAIR_SHARDED
    return Verdict.DOES_NOT_FIT_PAIR


def cards_needed_sharded(one_copy: MemoryPerCard, usable_per_card_gb: float) -> int | None:
    """Smallest n with (weights + gradients + optimizer) / n + activations + overhead ≤ usable; None when the
    activations and the overhead alone exceed a card."""
    room = usable_per_card_gb - one_copy.activations - one_copy.overhead
    if room <= 0:
        return None
    return max(1, math.ceil((one_copy.weights + one_copy.gradients + one_copy.optimizer) / room))


def lots_recommended(verdict: str) -> int | None:
    """One lot when one card or the lot's sharded pair holds the job; none to order otherwise."""
    return None if verdict == Verdict.DOES_NOT_FIT_PAIR else 1


@dataclass(frozen=True)
class FormulaRow:
    part: str  # weights, gradients, optimizer, activations, overhead, total
    label: str
    gb: float
    formula: str


@dataclass(frozen=True)
class Advice:
    request: FitRequest
    shape: ModelShape
    gpu_model: str
    card_memory_gb: int
    cards_per_lot: int
    usable_gb: float
    per_card: MemoryPerCard  # for the strategy chosen
    one_copy: MemoryPerCard
    sharded: MemoryPerCard
    verdict: str
    title: str
    message: str
    rows: list[FormulaRow]
    formulas: list[str]
    notes: list[str]
    lots: int | None
    h200_fits: bool

    @property
    def usable_formula(self) -> str:
        return self.formulas[-1]


def _n(value: float, decimals: int = 0) -> str:
    """A number in the active language's format, with thousands grouping."""
    return number_format(round(value, decimals), decimal_pos=decimals, use_l10n=True, force_grouping=True)

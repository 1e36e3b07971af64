"""The estimates against cases computed by hand (GB = 10^9 bytes; usable = 90 % of 180 GB = 162 GB)."""

from __future__ import annotations

import pytest

from orders.models import LotSpec
from shop.advice import advice_for_current_lot
from shop.advisor import memory_per_card, model_shape
from tests.shop.advisor.helpers import GB, recipe

pytestmark = pytest.mark.django_db

# 4,096 tokens × 1 sequence × h × A (2 bytes in BF16) × (L + 17) with checkpointing
ACTIVATIONS_7B = 4096 * 1 * 4096 * 2 * (32 + 17) / GB  # h = 4096, L = 32: 1.644 GB
ACTIVATIONS_13B = 4096 * 1 * 5120 * 2 * (40 + 17) / GB  # h = 5120, L = 40: 2.391 GB
ACTIVATIONS_70B = 4096 * 1 * 8192 * 2 * (80 + 17) / GB  # h = 8192, L = 80: 6.510 GB
OVERHEAD = 5.0


def test_7b_in_bf16_mixed_with_adamw_fits_one_card_and_an_h200():
    # Given 7B parameters: weights 2 B, gradients 2 B, FP32 master + Adam m and v 12 B = 16 B/param = 112 GB
    advice = advice_for_current_lot(recipe(7_000_000_000, hidden_size=4096, layers=32))

    # Then each part matches the hand computation, and 112 + 1.6 + 5 = 118.6 GB fits one card
    assert advice.per_card.weights == pytest.approx(14.0)
    assert advice.per_card.gradients == pytest.approx(14.0)
    assert advice.per_card.optimizer == pytest.approx(84.0)
    assert advice.per_card.activations == pytest.approx(ACTIVATIONS_7B)
    assert advice.per_card.overhead == OVERHEAD
    assert advice.per_card.total == pytest.approx(112 + ACTIVATIONS_7B + OVERHEAD)
    assert advice.usable_gb == pytest.approx(162.0)
    assert advice.verdict == "fits_one_card"
    assert advice.lots == 1
    # And it says the second card sits idle unless data parallel, and that an H200 (126.9 GB usable) may suit
    assert "sits idle unless you run data parallel" in advice.message
    assert "H200 SXM with 141 GB" in advice.message
    assert "MI300X" not in advice.message


def test_13b_needs_the_pair_sharded_because_a_full_copy_does_not_fit():
    # Given 13B parameters with the same recipe: 13 × 16 = 208 GB of weights, gradients and optimizer state
    advice = advice_for_current_lot(recipe(13_000_000_000, hidden_size=5120, layers=40))

    # Then one copy per card (data parallel) needs 208 + 2.4 + 5 = 215.4 GB: more than 162 GB usable
    assert advice.one_copy.total == pytest.approx(208 + ACTIVATIONS_13B + OVERHEAD)
    assert advice.per_card == advice.one_copy
    # And sharded over the 2 cards: 104 GB + 2.4 GB of activations (not divided) + 5 = 111.4 GB: it fits
    assert advice.sharded.weights + advice.sharded.gradients + advice.sharded.optimizer == pytest.approx(104.0)
    assert advice.sharded.activations == pytest.approx(ACTIVATIONS_13B)
    assert advice.sharded.total == pytest.approx(104 + ACTIVATIONS_13B + OVERHEAD)
    assert advice.verdict == "needs_pair_sharded"
    assert advice.lots == 1
    assert "Data parallelism alone will not do: each card would keep a full copy" in advice.message
    assert "H200" not in advice.message
    assert "MI300X" not in advice.message


def test_the_sharded_strategy_divides_weights_gradients_and_optimizer_state_by_two():
    advice = advice_for_current_lot(recipe(13_000_000_000, hidden_size=5120, layers=40, strategy="sharded"))

    assert (advice.per_card.weights, advice.per_card.gradients) == (pytest.approx(13.0), pytest.approx(13.0))
    assert advice.per_card.optimizer == pytest.approx(78.0)
    assert advice.per_card.activations == pytest.approx(ACTIVATIONS_13B)
    assert advice.verdict == "needs_pair_sharded"


def test_70b_does_not_fit_a_pair_even_sharded():
    # Given 70B parameters with the same recipe: 70 × 16 = 1,120 GB, 560 GB per card when sharded over two
    advice = advice_for_current_lot(recipe(70_000_000_000, hidden_size=8192, layers=80, strategy="sharded"))

    # Then 560 + 6.5 + 5 = 571.5 GB per card is far above 162 GB: nothing to order, the MI300X is mentioned
    assert advice.one_copy.total == pytest.approx(1120 + ACTIVATIONS_70B + OVERHEAD)
    assert advice.per_card.total == pytest.approx(560 + ACTIVATIONS_70B + OVERHEAD)
    assert advice.verdict == "does_not_fit_pair"
    assert advice.lots is None
    assert "AMD MI300X with 192 GB per card" in advice.message
    assert "ready for ROCm" in advice.message
    assert "does not pool their memory" in advice.message
    # 1,120 / (162 - 6.5 - 5) = 7.4: sharded across nodes it would take at least 8 cards
    assert "at least 8 cards" in advice.message
    assert "H200" not in advice.message


def test_without_checkpointing_activations_count_17_values_per_token_hidden_unit_and_layer():
    # 4,096 × 1 × 4,096 × 32 × 17 × 2 B = 18.25 GB: 135.3 GB in all, fits a B200 but not an H200's 126.9 GB
    advice = advice_for_current_lot(recipe(7_000_000_000, hidden_size=4096, layers=32, activation_checkpointing=False))

    assert advice.per_card.activations == pytest.approx(4096 * 4096 * 32 * 17 * 2 / GB)
    assert advice.verdict == "fits_one_card"
    assert "H200" not in advice.message


def test_a_model_above_141_gb_that_fits_one_b200_gets_no_h200_hint():
    # 9B: 144 GB + 1.6 + 5 = 150.6 GB, under 162 GB but above the H200's 141 GB
    advice = advice_for_current_lot(recipe(9_000_000_000, hidden_size=4096, layers=32))

    assert advice.per_card.total == pytest.approx(144 + ACTIVATIONS_7B + OVERHEAD)
    assert advice.verdict == "fits_one_card"
    assert "H200" not in advice.message
    assert "MI300X" not in advice.message


@pytest.mark.parametrize(
    ("precision", "optimizer", "weights", "gradients", "optimizer_state"),
    [
        ("fp32", "adamw", 4, 4, 8),  # FP32 weights and gradients, m and v in FP32, no master copy
        ("bf16_mixed", "adamw_8bit", 2, 2, 4 + 2),  # FP32 master + m and v in one byte each
        ("bf16", "sgd_momentum", 2, 2, 4),  # pure BF16: no master copy, one FP32 momentum buffer
        ("fp8", "adamw", 2, 2, 4 + 8),  # FP8 counted like BF16 mixed precision
        ("bf16_mixed", "adafactor", 2, 2, 4 + 8 / 4096),  # factored second moments: 8 / h
    ],
)
def test_bytes_per_parameter_for_each_precision_and_optimizer(
    precision, optimizer, weights, gradients, optimizer_state
):
    request = recipe(1_000_000_000, precision=precision, optimizer=optimizer, hidden_size=4096, layers=32)

    memory = memory_per_card(request, model_shape(request.parameters, 4096, 32), shards=1)

    assert memory.weights == pytest.approx(weights)
    assert memory.gradients == pytest.approx(gradients)
    assert memory.optimizer == pytest.approx(optimizer_state)


def test_fp32_activations_take_four_bytes_per_value():
    request = recipe(1_000_000_000, precision="fp32", hidden_size=4096, layers=32)

    memory = memory_per_card(request, model_shape(request.parameters, 4096, 32), shards=1)

    assert memory.activations == pytest.approx(4096 * 4096 * 4 * (32 + 17) / GB)


def test_micro_batch_and_sequence_length_scale_the_activations():
    small = advice_for_current_lot(recipe(7_000_000_000, hidden_size=4096, layers=32))
    large = advice_for_current_lot(recipe(7_000_000_000, hidden_size=4096, layers=32, micro_batch_size=4))

    assert large.per_card.activations == pytest.approx(4 * small.per_card.activations)


def test_the_shape_is_derived_from_the_parameter_count_when_not_given():
    # h = (128 × 7e9 / 12)^(1/3) = 4,211 -> 4,096 (a multiple of 256); L = 7e9 / (12 × 4,096²) = 34.8 -> 35
    assert model_shape(7_000_000_000) == model_shape(7_000_000_000, None, None)
    shape = model_shape(7_000_000_000)
    assert (shape.hidden_size, shape.layers, shape.hidden_derived, shape.layers_derived) == (4096, 35, True, True)
    # Only the layers given: h = sqrt(7e9 / (12 × 32)) = 4,270 -> 4,288 (a multiple of 64)
    assert model_shape(7_000_000_000, layers=32).hidden_size == 4288
    # Only the hidden size given: L = 7e9 / (12 × 4,096²) -> 35
    assert model_shape(7_000_000_000, hidden_size=4096).layers == 35


def test_the_advice_says_when_it_derived_the_shape():
    derived = advice_for_current_lot(recipe(7_000_000_000))
    given = advice_for_current_lot(recipe(7_000_000_000, hidden_size=4096, layers=32))

    assert any("we derived them from the parameter count" in note for note in derived.notes)
    assert not any("we derived them" in note for note in given.notes)


def test_the_card_capacity_comes_from_the_lot_spec():
    # Given a lot whose cards had 80 GB (usable 72 GB), the 7B recipe (118.6 GB) no longer fits one card
    spec = LotSpec.current()
    spec.gpu_memory_gb = 80
    spec.save(update_fields=["gpu_memory_gb"])

    advice = advice_for_current_lot(recipe(7_000_000_000, hidden_size=4096, layers=32))

    assert advice.usable_gb == pytest.approx(72.0)
    assert advice.verdict == "needs_pair_sharded"  # 56 + 1.6 + 5 = 62.6 GB per card sharded


def test_the_formulas_show_the_numbers():
    advice = advice_for_current_lot(recipe(7_000_000_000, hidden_size=4096, layers=32))

    assert advice.formulas == [
        "weights = P × 2 B (BF16) = 7,000,000,000 × 2 B = 14.0 GB",
        "gradients = P × 2 B (BF16) = 7,000,000,000 × 2 B = 14.0 GB",
        "optimizer state = P × 12 B (4 B FP32 master weights + 8 B AdamW m and v in FP32)"
        " = 7,000,000,000 × 12 B = 84.0 GB",
        "activations = s × b × h × (L + 17) × A = 4,096 × 1 × 4,096 × (32 + 17) × 2 B = 1.6 GB",
        "framework overhead = 5.0 GB, a fixed allowance (CUDA context, communication buffers, memory fragmentation)",
        "total per card = weights + gradients + optimizer state + activations + overhead"
        " = 14.0 + 14.0 + 84.0 + 1.6 + 5.0 = 118.6 GB",
        "usable per card = 90 % × 180 GB = 162.0 GB (a safety margin)",
    ]


def test_sharded_formulas_divide_by_the_cards():
    advice = advice_for_current_lot(recipe(13_000_000_000, hidden_size=5120, layers=40, strategy="sharded"))

    assert advice.formulas[0] == "weights = P × 2 B (BF16) ÷ 2 = 13,000,000,000 × 2 B ÷ 2 = 13.0 GB"

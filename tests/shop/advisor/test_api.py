"""POST /api/v1/advisor/ (and GET with query parameters): the estimate as JSON, or a 400 with a message per field."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.api_answers import error_fields

pytestmark = pytest.mark.django_db

URL = "/api/v1/advisor/"
THIRTEEN_B = {
    "parameters": "13B",
    "precision": "bf16_mixed",
    "optimizer": "adamw",
    "sequence_length": 4096,
    "micro_batch_size": 1,
    "hidden_size": 5120,
    "layers": 40,
    "activation_checkpointing": True,
    "strategy": "sharded",
}


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


def test_a_13b_model_sharded_gets_its_memory_per_card_and_one_lot(api_client):
    # When a customer asks about 13B in BF16 mixed precision with AdamW, sharded
    response = api_client.post(URL, THIRTEEN_B, format="json")

    # Then the memory per card is split into its parts: 208 GB / 2 + 2.39 GB of activations + 5 GB
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["per_card_gb"] == {
        "weights": 13.0,
        "gradients": 13.0,
        "optimizer": 78.0,
        "activations": 2.39,
        "overhead": 5.0,
        "total": 111.39,
    }
    assert body["totals_gb"] == {"data_parallel": 215.39, "sharded": 111.39}
    assert body["card_memory_gb"] == 180
    assert body["usable_gb_per_card"] == 162.0
    assert body["verdict"] == "needs_pair_sharded"
    assert "Data parallelism alone will not do" in body["message"]
    assert body["lots"] == 1
    assert body["order_url"] == "http://testserver/order/?lots=1"
    assert body["formulas"][0] == "weights = P × 2 B (BF16) ÷ 2 = 13,000,000,000 × 2 B ÷ 2 = 13.0 GB"
    assert all(isinstance(formula, str) for formula in body["formulas"])
    assert body["model"] == {
        "parameters": 13_000_000_000,
        "hidden_size": 5120,
        "layers": 40,
        "hidden_size_derived": False,
        "layers_derived": False,
    }


def test_only_the_size_is_required_and_the_rest_has_defaults(api_client):
    # 7B written as a JSON number; BF16 mixed, AdamW, 4,096 tokens, 1 per card, no checkpointing, data parallel
    response = api_client.post(URL, {"parameters": 7_000_000_000}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["strategy"] == "data_parallel"
    assert body["per_card_gb"]["weights"] == 14.0
    assert body["per_card_gb"]["optimizer"] == 84.0
    assert body["model"]["hidden_size_derived"] is True
    assert body["verdict"] == "fits_one_card"


def test_get_with_query_parameters_gives_the_same_answer(api_client):
    posted = api_client.post(URL, THIRTEEN_B, format="json").json()

    response = api_client.get(URL, {**THIRTEEN_B, "activation_checkpointing": "true"})

    assert response.status_code == 200, response.content
    assert response.json() == posted


def test_a_model_too_big_for_a_pair_has_no_lots_and_no_order_url(api_client):
    response = api_client.post(URL, {**THIRTEEN_B, "parameters": "70e9", "hidden_size": 8192, "layers": 80})

    body = response.json()
    assert body["verdict"] == "does_not_fit_pair"
    assert body["lots"] is None
    assert body["order_url"] is None
    assert "MI300X" in body["message"]


def test_every_bad_field_gets_its_own_message_in_one_400(api_client):
    response = api_client.post(
        URL,
        {
            "parameters": "0",
            "precision": "fp4",
            "optimizer": "lion",
            "sequence_length": 0,
            "micro_batch_size": 0,
            "hidden_size": 8,
            "layers": 0,
            "strategy": "pipeline",
        },
        format="json",
    )

    assert response.status_code == 400
    errors = error_fields(response, "invalid")
    assert set(errors) == {
        "parameters",
        "precision",
        "optimizer",
        "sequence_length",
        "micro_batch_size",
        "hidden_size",
        "layers",
        "strategy",
    }
    assert errors["parameters"] == ["The number of parameters must be positive."]
    assert errors["sequence_length"] == ["The sequence length must be between 1 and 1,000,000 tokens."]
    assert errors["micro_batch_size"] == ["The micro-batch size must be between 1 and 65,536."]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("parameters", "10T", "The number of parameters must be below 10 trillion (10T); check the unit."),
        ("parameters", "lots", "Enter a number of parameters, for example 7B, 350M or 70e9."),
        ("sequence_length", 1_000_001, "The sequence length must be between 1 and 1,000,000 tokens."),
        ("sequence_length", "long", "A valid integer is required."),
    ],
)
def test_out_of_range_inputs_are_refused(api_client, field, value, message):
    response = api_client.post(URL, {**THIRTEEN_B, field: value}, format="json")

    assert response.status_code == 400
    assert error_fields(response, "invalid") == {field: [message]}


def test_a_missing_size_is_refused(api_client):
    response = api_client.post(URL, {}, format="json")

    assert response.status_code == 400
    assert list(error_fields(response, "invalid")) == ["parameters"]


def test_the_endpoint_is_in_the_openapi_schema(api_client):
    response = api_client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    assert "/api/v1/advisor/" in response.content.decode()

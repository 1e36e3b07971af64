"""The /advisor/ page: a GET form rendered on the server, the formulas and the verdict, the link to the order."""

from __future__ import annotations

import re

import pytest
from pytest_django.asserts import assertContains, assertNotContains

from shop.advisor import FitRequest
from tests.shop.advisor.helpers import as_query, recipe

pytestmark = pytest.mark.django_db

THIRTEEN_B = recipe(13_000_000_000, hidden_size=5120, layers=40, strategy="sharded")


def field_errors(response, field: str) -> str:
    match = re.search(rf'<ul class="field__errors" id="id_{field}_error">(.*?)</ul>', response.content.decode(), re.S)
    return match.group(1) if match else ""


def shown_text(response) -> str:
    """The page's text as the customer reads it: the formulas' numbers sit in spans that keep them on one line."""
    return re.sub(r"<[^>]+>", "", response.content.decode())


def lots_value(response) -> str:
    return re.search(r'<input type="number" name="lots"[^>]*value="(\d*)"', response.content.decode()).group(1)


def test_the_empty_form_labels_every_field_and_estimates_nothing_yet(client):
    response = client.get("/advisor/")

    assert response.status_code == 200
    page = response.content.decode()
    for field in ("parameters", "parameters_unit", "sequence_length", "micro_batch_size", "hidden_size", "layers"):
        assert f'<label for="id_{field}">' in page
    assertContains(response, '<label for="id_activation_checkpointing">')
    for legend in ("Training precision", "Optimizer", "How the cards share the model"):
        assertContains(response, f"<legend>{legend}</legend>")
    assertContains(response, '<form method="get" action="/advisor/" class="form">')
    assertNotContains(response, "/order/?lots=")
    assertNotContains(response, "Please correct the following")


def test_a_sent_form_shows_the_formulas_the_verdict_and_the_order_link(client):
    # When the customer asks about 13B parameters, sharded
    response = client.get("/advisor/", as_query(THIRTEEN_B, parameters="13", parameters_unit="B"))

    # Then the page shows each part with its formula, the verdict, and a link to order one lot
    assert response.status_code == 200
    assertContains(response, "Needs the pair of NVIDIA B200 cards, sharded")
    assertContains(response, "Data parallelism alone will not do")
    text = shown_text(response)
    assert "weights = P × 2 B (BF16) ÷ 2 = 13,000,000,000 × 2 B ÷ 2 = 13.0 GB" in text
    assert "optimizer state = P × 12 B (4 B FP32 master weights + 8 B AdamW m and v in FP32)" in text
    assert "activations = s × b × h × (L + 17) × A" in text
    assert "usable per card = 90 % × 180 GB = 162.0 GB" in text
    # And no number of a formula can break across two lines
    assertContains(response, '= <span class="formula__number">13,000,000,000</span> ×')
    assertContains(response, "215.4 GB")  # one copy per card
    assertContains(response, "111.4 GB")  # sharded
    assertContains(response, 'href="/order/?lots=1"')
    # And the form keeps what was sent
    assertContains(response, 'value="sharded" id="id_strategy_1" checked')


def test_a_link_with_only_the_size_uses_the_defaults_for_the_rest(client):
    # BF16 mixed precision, AdamW, 4,096 tokens, 1 per card, data parallel; the size read in billions
    response = client.get("/advisor/", {"parameters": "13"})

    assertNotContains(response, "Please correct the following")
    assert "weights = P × 2 B (BF16) = 13,000,000,000 × 2 B = 26.0 GB" in shown_text(response)
    assertContains(response, "Needs the pair of NVIDIA B200 cards, sharded")


def test_a_field_sent_empty_is_reported(client):
    response = client.get("/advisor/", as_query(THIRTEEN_B, sequence_length=""))

    assert "This field is required." in field_errors(response, "sequence_length")


def test_a_small_model_mentions_the_h200(client):
    response = client.get("/advisor/", as_query(recipe(7_000_000_000, hidden_size=4096, layers=32)))

    assertContains(response, "Fits on one NVIDIA B200")
    assertContains(response, "H200 SXM with 141 GB")
    assertNotContains(response, "MI300X")
    assertContains(response, 'href="/order/?lots=1"')


def test_a_model_too_big_for_the_pair_has_advice_but_no_order_link(client):
    response = client.get("/advisor/", as_query(FitRequest(parameters=70_000_000_000), activation_checkpointing="on"))

    assertContains(response, "Does not fit a pair of NVIDIA B200 cards")
    assertContains(response, "AMD MI300X with 192 GB per card")
    assertNotContains(response, "/order/?lots=")


def test_bad_inputs_are_shown_next_to_their_fields_and_summarised(client):
    response = client.get("/advisor/", as_query(THIRTEEN_B, parameters="20T", sequence_length="0"))

    assertContains(response, "Please correct the following")
    assert "below 10 trillion" in field_errors(response, "parameters")
    assert "between 1 and 1,000,000 tokens" in field_errors(response, "sequence_length")
    assertContains(response, 'href="#id_parameters"')
    assertContains(response, 'aria-invalid="true"')
    assertNotContains(response, "/order/?lots=")


def test_the_page_has_no_inline_script_and_no_inline_style(client):
    # A strict Content-Security-Policy allows neither; the page works without JavaScript
    page = client.get("/advisor/", as_query(THIRTEEN_B)).content.decode()

    assert not re.search(r"<script(?![^>]*\bsrc=)", page)
    assert "style=" not in page
    assert "<style" not in page


def test_the_nav_and_the_home_page_link_to_the_advisor(client):
    home = client.get("/")

    assert home.content.decode().count('href="/advisor/"') == 2  # the navigation and the home page
    assertContains(client.get("/advisor/"), 'href="/advisor/" aria-current="page"')


def test_the_order_link_prefills_the_lots_of_the_configure_step(client, make_node):
    # Given a customer who had chosen 3 lots in the wizard
    for _ in range(3):
        make_node()
    client.post("/order/", {"lots": 3, "duration_days": 7, "preparation": "pytorch-blackwell", "refresh": "1"})
    assert lots_value(client.get("/order/")) == "3"

    # When they follow the advisor's recommendation
    advice_page = client.get("/advisor/", as_query(THIRTEEN_B))
    link = re.search(r'href="(/order/\?lots=\d+)"', advice_page.content.decode()).group(1)
    configure = client.get(link)

    # Then the configure step shows the recommended lot
    assert link == "/order/?lots=1"
    assert configure.status_code == 200
    assert lots_value(configure) == "1"

"""The "Pay with wallet" block of a payment (templates/shop/_wallet_button.html): hidden in the HTML, the exact
transfer in its data, a network a wallet may add only with the chain's public RPC, and its words translated."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.template.loader import render_to_string
from django.utils import translation

ADDRESS = "0x52908400098527886E0F7030069857D2E4169EE7"


def payment(**fields) -> dict:
    """The fields of shop/order_view.py payment_fields that the block reads."""
    return {
        "address": ADDRESS,
        "amount": "1.5",
        "amount_base_units": "1500000",
        "asset": "USDC",
        "contract": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        "chain_id": 8453,
        "network_name": "Base",
        **fields,
    }


def render(p: dict, language: str = "en") -> str:
    with translation.override(language):
        return render_to_string("shop/_wallet_button.html", {"p": p})


def data(rendered: str, name: str) -> str:
    return html.unescape(re.search(rf'data-{name}="([^"]*)"', rendered).group(1))


def test_the_block_is_hidden_until_a_script_finds_a_wallet_and_carries_the_exact_transfer():
    rendered = render(payment())

    assert re.search(rf'<div class="wallet-pay" id="wallet-pay-{ADDRESS}" hidden', rendered)
    assert (data(rendered, "to"), data(rendered, "amount"), data(rendered, "chain-id")) == (ADDRESS, "1500000", "8453")
    assert data(rendered, "contract") == payment()["contract"]
    assert re.search(r'<script src="[^"]*/js/wallet-pay[.\w]*\.js" defer></script>', rendered)


def test_a_coin_payment_names_no_contract():
    rendered = render(payment(contract=None, asset="ETH", amount_base_units="663333333333333334"))

    assert data(rendered, "contract") == ""
    assert data(rendered, "amount") == "663333333333333334"


def test_an_underpaid_payment_asks_the_wallet_only_for_what_is_missing_and_a_paid_one_for_nothing():
    underpaid = render(payment(received_base_units="1000000", missing="0.5"))
    paid = render(payment(received_base_units="1500000", missing="0"))

    assert data(underpaid, "amount") == "500000"
    assert "0.5 USDC" in data(underpaid, "text-confirm")
    assert "wallet-pay" not in paid


def test_a_network_the_wallet_may_not_know_is_added_with_its_public_rpc_never_the_shops(monkeypatch):
    monkeypatch.setenv("CHAIN_RPC_URLS_BASE", "https://base.provider.example/v2/secret-api-key")

    parameters = json.loads(data(render(payment()), "add-chain"))

    assert parameters == {
        "chainId": "0x2105",
        "chainName": "Base",
        "nativeCurrency": {"name": "Ether", "symbol": "ETH", "decimals": 18},
        "rpcUrls": ["https://mainnet.base.org"],
        "blockExplorerUrls": ["https://basescan.org"],
    }


def test_the_local_chain_is_never_added_by_the_page():
    rendered = render(payment(chain_id=31337, network_name="Local development chain"))

    assert data(rendered, "add-chain") == ""
    assert "Add the network in your wallet first" in data(rendered, "text-unknown-chain")


@pytest.mark.parametrize(("language", "words"), [("es", "Pagar con el monedero"), ("fr", "Payer avec le portefeuille")])
def test_the_words_are_translated(language, words):
    rendered = render(payment(), language)

    assert words in rendered
    english = render(payment())
    for name in (
        "connecting",
        "switching",
        "adding",
        "unknown-chain",
        "confirm",
        "sent",
        "rejected",
        "pending",
        "failed",
    ):
        assert data(rendered, f"text-{name}") != data(english, f"text-{name}"), name
    assert "{hash}" in data(rendered, "text-sent") and "{reason}" in data(rendered, "text-failed")

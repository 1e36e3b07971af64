"""Finality is one rule per network: blocks:N, safe or finalized, and the customer is told the expected wait.

anvil's `--slots-in-an-epoch 2` puts its `safe` block 2 below the head and `finalized` 4 below: the tags move
for real as blocks are mined. Before, every network was "N confirmations or at the `safe` tag", so a tag
could only shorten the wait (an L2 counted as paid seconds after the sequencer's word alone).
"""

from __future__ import annotations

import pytest

from payments.devnet import devnet_setup
from payments.models import Network
from payments.networks import rpc_client
from tests.payments.verification.chain import Chain, Wallet
from tests.payments.verification.helpers import units
from tests.payments.verification.rpc_proxy import RpcProxy
from tests.servers import Anvil


@pytest.fixture
def epoch_chain(db, monkeypatch, no_other_networks):
    """The `local` network on an anvil whose safe block is 2 below the head and finalized 4 below."""
    node = Anvil("--slots-in-an-epoch", "2")
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", node.url)
    try:
        devnet_setup(client=rpc_client(Network.objects.get(slug="local")))
        chain = Chain(node=node, wallet=Wallet(node.url))
        chain.usdc = Network.objects.get(slug="local").assets.get(symbol="USDC").contract
        chain.mine(10)
        yield chain
    finally:
        node.stop()


def local_rule(finality: str, confirmations: int = 2) -> None:
    Network.objects.filter(slug="local").update(finality=finality, confirmations_required=confirmations)


def payment_status_after(chain, customer, scan_pass, blocks: int) -> tuple[str, int]:
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(blocks)
    scan_pass()
    seen = customer.read(placed)
    return seen["payment"]["status"], seen["payment"]["confirmations"]


@pytest.mark.parametrize(
    ("blocks_after", "expected"),
    [(0, "detected"), (3, "detected"), (8, "detected"), (9, "confirmed")],
)
def test_blocks_n_waits_for_n_confirmations_whatever_the_safe_tag_says(
    epoch_chain, customer, scan_pass, blocks_after, expected
):
    # Given a network whose rule is blocks:10, on a chain whose `safe` block is only 2 below the head
    local_rule("blocks", 10)

    # When a transfer has blocks_after blocks on top of it (blocks_after + 1 confirmations)
    status, confirmations = payment_status_after(epoch_chain, customer, scan_pass, blocks_after)

    # Then it is final at 10 confirmations, never earlier because the `safe` block passed it
    assert (status, confirmations) == (expected, blocks_after + 1)


@pytest.mark.parametrize(("blocks_after", "expected"), [(0, "detected"), (1, "detected"), (2, "confirmed")])
def test_safe_is_final_once_the_safe_block_reaches_the_transfer(
    epoch_chain, customer, scan_pass, blocks_after, expected
):
    # Given an L2-style rule: final at the `safe` block (2 below the head here), however many confirmations
    local_rule("safe", 50)

    status, _confirmations = payment_status_after(epoch_chain, customer, scan_pass, blocks_after)

    assert status == expected


@pytest.mark.parametrize(("blocks_after", "expected"), [(2, "detected"), (3, "detected"), (4, "confirmed")])
def test_finalized_is_final_only_at_the_finalized_block(epoch_chain, customer, scan_pass, blocks_after, expected):
    # Given a rule of final at the `finalized` block (4 below the head here): `safe` (2 below) is not enough
    local_rule("finalized", 1)

    status, _confirmations = payment_status_after(epoch_chain, customer, scan_pass, blocks_after)

    assert status == expected


def test_a_provider_without_the_rules_tag_takes_the_network_down_with_the_reason(
    epoch_chain, customer, scan_pass, monkeypatch
):
    # Given a finalized rule, and a provider that does not serve the `finalized` tag
    placed = customer.order()
    local_rule("finalized", 1)
    proxy = RpcProxy(epoch_chain.node.url)
    proxy.refused_tags = {"finalized"}
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", proxy.url)
    try:
        epoch_chain.wallet.pay_token(epoch_chain.usdc, placed["payment"]["address"], units(placed))
        epoch_chain.mine(20)

        # When the verifier passes (`scan_payments` exits 1: a network failed)
        with pytest.raises(SystemExit):
            scan_pass()
    finally:
        proxy.stop()

    # Then nothing is confirmed on that provider's word, and the network is down, saying why
    assert customer.read(placed)["payment"]["status"] == "pending"
    network = Network.objects.get(slug="local")
    assert network.rpc_ok is False
    assert "does not serve the `finalized` block" in network.rpc_error


def test_the_expected_wait_is_shown_before_and_after_paying(epoch_chain, customer, client):
    # Given the local network with a safe rule, and Base-like wording
    Network.objects.filter(slug="local").update(finality="safe", finality_wait_seconds=600)

    # When a customer places an order and reads it
    placed = customer.order()
    seen = customer.read(placed)

    # Then the API names the rule and the wait, and the order page says it in words
    assert (seen["payment"]["finality"], seen["payment"]["finality_wait_seconds"]) == ("safe", 600)
    assert seen["payment"]["confirmations_required"] is None
    page = client.get(placed["status_url"]).content.decode()
    assert "a transfer counts once its batch is recorded on the parent chain (its safe block): about 10 minutes" in page
    catalog = client.get("/api/v1/catalog/").json()
    assert [(n["slug"], n["finality"]) for n in catalog["networks"]] == [("local", "safe")]


def test_the_payment_step_of_the_wizard_shows_each_networks_wait_in_spanish(epoch_chain, client, order_payload):
    # Given the local network at blocks:2, about 4 seconds
    local_rule("blocks", 2)
    Network.objects.filter(slug="local").update(finality_wait_seconds=4)
    session = client.session
    session["order_wizard"] = {
        **{key: order_payload[key] for key in ("lots", "duration_days", "preparation")},
        **{key: order_payload[key] for key in ("first_name", "last_name", "email", "ssh_public_key")},
        "terms": True,
    }
    session.save()

    # When a Spanish-speaking customer reaches the payment step
    page = client.get("/order/payment/", headers={"Accept-Language": "es"})

    # Then each network says how long a transfer takes to count
    assert page.status_code == 200, page.content[:300]
    assert "una transferencia cuenta tras 2 confirmaciones: unos 4 segundos." in page.content.decode()

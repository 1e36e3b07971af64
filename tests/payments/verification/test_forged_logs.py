"""One lying provider must not pay an order (issue 39, item 5). With two providers configured, the first adds a
forged USDC `Transfer` log to the order's deposit address in its `eth_getLogs` answer, in a real block, and answers
the made-up transaction's receipt consistently; the second (the honest anvil) has no such transaction. A credit
becomes final only when a second provider returns the same log in the same block: the order stays unpaid and the
credit's evidence says why. With one provider, /healthz and the admin's network list say its word is not checked."""

from __future__ import annotations

import secrets

import pytest

from payments.admin import NetworkAdmin
from payments.credits import TRANSFER_TOPIC, address_topic
from payments.models import Credit, Network
from tests.payments.verification.helpers import local, order_of, payment_of, units
from tests.payments.verification.rpc_proxy import RpcProxy


class ForgingProxy(RpcProxy):
    """A provider that adds one made-up Transfer log (and its receipt) to what the real chain says."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.forged: dict | None = None

    def forge(self, *, token: str, to: str, amount: int, block: dict) -> str:
        tx_hash = "0x" + secrets.token_hex(32)
        self.forged = {
            "address": token.lower(),
            "topics": [TRANSFER_TOPIC, address_topic("0x" + "11" * 20), address_topic(to)],
            "data": "0x" + f"{amount:064x}",
            "blockNumber": block["number"],
            "blockHash": block["hash"],
            "blockTimestamp": block["timestamp"],
            "transactionHash": tx_hash,
            "transactionIndex": "0x0",
            "logIndex": "0x7",
            "removed": False,
        }
        return tx_hash

    def _lie(self, call: dict, answer: dict, lagging: int | None) -> dict:
        answer = super()._lie(call, answer, lagging)
        forged, method, params = self.forged, call.get("method"), call.get("params") or []
        if forged is None:
            return answer
        if method == "eth_getLogs" and self._asked_for(params[0], forged):
            return {**answer, "result": [*(answer.get("result") or []), forged]}
        if method == "eth_getTransactionReceipt" and params[0].lower() == forged["transactionHash"]:
            receipt = {
                "status": "0x1",
                "transactionHash": forged["transactionHash"],
                "blockHash": forged["blockHash"],
                "blockNumber": forged["blockNumber"],
                "logs": [forged],
            }
            return {**answer, "result": receipt}
        return answer

    @staticmethod
    def _asked_for(window: dict, forged: dict) -> bool:
        first, last = int(window.get("fromBlock", "0x0"), 16), int(window.get("toBlock", "0x0"), 16)
        recipients = (window.get("topics") or [None, None, None])[2:3]
        wanted = recipients[0] if recipients else None
        wanted = wanted if isinstance(wanted, list) else [wanted]
        return first <= int(forged["blockNumber"], 16) <= last and forged["topics"][2] in wanted


@pytest.fixture
def liar_first(chain, monkeypatch):
    liar = ForgingProxy(chain.node.url)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{liar.url},{chain.node.url}")
    yield liar
    liar.stop()


def test_a_transfer_only_one_provider_reports_never_pays_the_order(chain, customer, scan_pass, liar_first):
    # Given an order, and a first provider that reports a USDC transfer of the whole amount to its address in the
    # latest real block, with a consistent receipt; the second provider (the chain itself) has no such transfer
    placed = customer.order()
    chain.mine(1)
    block = chain.node.call("eth_getBlockByNumber", ["latest", False])
    tx_hash = liar_first.forge(token=chain.usdc, to=placed["payment"]["address"], amount=units(placed), block=block)

    # When the chain grows well past the confirmations and the verifier passes three times
    for _ in range(3):
        chain.mine(3)
        scan_pass()

    # Then the made-up credit is seen but never final: the order is not paid, and the evidence says why
    credit = Credit.objects.get(tx_hash=tx_hash)
    assert credit.final is False
    assert "no such transfer" in credit.evidence["last_dispute"]
    assert payment_of(placed).status != "confirmed"
    assert order_of(placed).status == "awaiting_payment"
    balance = chain.node.call("eth_call", [{"to": chain.usdc, "data": balance_of(placed["payment"]["address"])}])
    assert int(balance, 16) == 0


def test_a_real_transfer_both_providers_report_confirms(chain, customer, scan_pass, liar_first):
    # Given the same two providers, the first lying about nothing this time
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))

    # When the verifier passes past the confirmations
    chain.mine(2)
    scan_pass()

    # Then the second provider returned the same log in the same block: the order is paid
    assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")


def test_a_network_with_one_provider_says_its_word_is_not_checked(chain, client, admin_client, monkeypatch):
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", chain.node.url)
    report = client.get("/healthz").json()["networks"]["local"]["verifier"]
    assert report["providers"] == 1 and "one provider" in report["warning"]
    assert "one provider" in NetworkAdmin(Network, None).verifier(local())

    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{chain.node.url},{chain.node.url}/")
    report = client.get("/healthz").json()["networks"]["local"]["verifier"]
    assert report["providers"] == 2 and report["warning"] is None


def balance_of(address: str) -> str:
    return "0x70a08231" + address.lower()[2:].rjust(64, "0")

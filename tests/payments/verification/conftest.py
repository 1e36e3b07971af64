"""Fixtures for the on-chain verification tests: a chain of their own, a customer who orders through the API
and pays from their own wallet, and the verifier's scan pass.

Every test that mines or reorganises gets its own anvil: nothing it does to the chain reaches another test.
"""

from __future__ import annotations

import datetime as dt
import io
import os

import pytest
from bip_utils import Bip39SeedGenerator, Bip44, Bip44Coins
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from payments.devnet import deploy_token, devnet_setup
from payments.models import Asset, Network
from payments.networks import rpc_client
from payments.rpc import RpcClient
from tests.payments.signer.chain import MNEMONIC, mnemonic_file
from tests.payments.verification.chain import Chain, Wallet
from tests.payments.verification.helpers import ORDERS_URL, order_of, payment_of, units
from tests.payments.verification.money_out import TREASURY
from tests.payments.verification.rpc_proxy import RpcProxy
from tests.placing import order_posted
from tests.servers import Anvil


@pytest.fixture
def no_other_networks(monkeypatch):
    """No CHAIN_RPC_URLS_* from the shell leaks in: a test configures the networks it uses."""
    for name in list(os.environ):
        if name.startswith("CHAIN_RPC_URLS_"):
            monkeypatch.delenv(name)


@pytest.fixture
def bare_chain(db, monkeypatch, no_other_networks):
    """A fresh anvil as the `local` network's only RPC URL, with nothing deployed on it."""
    node = Anvil()
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", node.url)
    try:
        yield Chain(node=node, wallet=Wallet(node.url))
    finally:
        node.stop()


@pytest.fixture
def chain(bare_chain):
    """The `local` network with test USDC and USDT (6 decimals) deployed, as `devnet setup` does."""
    devnet_setup(client=rpc_client(Network.objects.get(slug="local")))
    bare_chain.usdc = Asset.objects.get(network__slug="local", symbol="USDC").contract
    bare_chain.usdt = Asset.objects.get(network__slug="local", symbol="USDT").contract
    bare_chain.mine(5)  # room below the payments: a reorg of a few blocks takes only what a test sent
    return bare_chain


@pytest.fixture
def foreign_token(chain) -> str:
    """A token the shop does not sell (a bridged USDC.e, a USDT0, an airdrop), 18 decimals."""
    return deploy_token(RpcClient([chain.node.url]), name="Bridged USD Coin", symbol="USDC.e", decimals=18)


class Customer:
    """Orders through the public API and presses "I have paid", as a browser or script would.

    Work the request leaves for after its commit (emails, the on-chain check) runs as it would in
    production: the test's transaction never commits, so the commit callbacks are run explicitly.
    """

    def __init__(self, client: Client, make_node, order_payload: dict, capture) -> None:
        self.client = client
        self.make_node = make_node
        self.order_payload = order_payload
        self.capture = capture

    def order(self, **fields) -> dict:
        """Place an order for one lot (a node is added for it); returns the 201 body."""
        self.make_node()
        body = {**self.order_payload, "network": "local", "asset": "USDC", **fields}
        with self.capture(execute=True):
            return order_posted(self.client, body)

    def paid(self, placed: dict, tx_hash: str | None = None):
        """POST "I have paid" (optionally with a tx hash) with the order's token."""
        body = {} if tx_hash is None else {"tx_hash": tx_hash}
        with self.capture(execute=True):
            return self.client.post(
                f"{ORDERS_URL}{placed['reference']}/paid/",
                body,
                content_type="application/json",
                headers={"X-Order-Token": placed["access_token"]},
            )

    def read(self, placed: dict) -> dict:
        response = self.client.get(
            f"{ORDERS_URL}{placed['reference']}/", headers={"X-Order-Token": placed["access_token"]}
        )
        assert response.status_code == 200, response.content
        return response.json()


@pytest.fixture
def customer(client, make_node, order_payload, django_capture_on_commit_callbacks) -> Customer:
    return Customer(client, make_node, order_payload, django_capture_on_commit_callbacks)


@pytest.fixture
def scan_pass(django_capture_on_commit_callbacks):
    """`manage.py scan_payments`: one verification pass over every configured network (emails sent).

    Returns what the command printed; a network whose RPC is down makes it exit with status 1.
    """

    def run() -> str:
        out = io.StringIO()
        with django_capture_on_commit_callbacks(execute=True):
            call_command("scan_payments", stdout=out, stderr=out)
        return out.getvalue()

    return run


@pytest.fixture
def providers(chain, monkeypatch):
    """Two RPC providers in front of the test's anvil: the `local` network's only URLs."""
    proxies = [RpcProxy(chain.node.url), RpcProxy(chain.node.url)]
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", ",".join(proxy.url for proxy in proxies))
    yield proxies
    for proxy in proxies:
        proxy.stop()


def tightly_limited(proxy: RpcProxy, *, refuse_batches: bool = False) -> RpcProxy:
    """About a free plan's limits (QuickNode's: 5-block eth_getLogs): 3-call batches (or none at all), and one
    HTTP request in 5 answered 429."""
    proxy.log_range_cap, proxy.log_range_style = 5, "quicknode"
    proxy.batch_cap, proxy.refuse_batches = 3, refuse_batches
    proxy.rate_limit_every = 5
    return proxy


@pytest.fixture
def tight_provider(request, chain, monkeypatch, settings):
    """The `local` network's only RPC URL: a provider with tight limits in front of the test's anvil (the chain
    helpers still talk to anvil directly). Parametrize it indirectly with True for one that refuses batches."""
    settings.RPC_RETRY_AFTER_MAX_SECONDS = 0  # the 429s' Retry-After (1 s) is not waited out in tests
    proxy = tightly_limited(RpcProxy(chain.node.url), refuse_batches=getattr(request, "param", False))
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", proxy.url)
    try:
        yield proxy
    finally:
        proxy.stop()
    # A test that set another URL after this one, or never read the chain, did not test the limits.
    assert proxy.requests, "nothing reached the tight provider"


@pytest.fixture
def provider(chain, monkeypatch):
    """One RPC provider in front of the test's anvil, the `local` network's only URL, with limits a test sets."""
    proxy = RpcProxy(chain.node.url)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", proxy.url)
    yield proxy
    proxy.stop()


@pytest.fixture
def treasurers_key(settings, tmp_path):
    """The shop's deposit addresses derive from the treasurer's mnemonic (its account xpub on the server);
    the mnemonic itself only in a 0600 file on 'the treasurer's machine'."""
    seed = Bip39SeedGenerator(MNEMONIC).Generate()
    account = Bip44.FromSeed(seed, Bip44Coins.ETHEREUM).Purpose().Coin().Account(0)
    settings.PAYMENTS_XPUB = account.PublicKey().ToExtended()
    settings.TREASURY_ADDRESS = TREASURY
    return mnemonic_file(tmp_path)


@pytest.fixture
def late_payment(chain, customer, scan_pass) -> dict:
    """An order whose full USDC payment arrived after its deadline: late, waiting for a reviewer."""
    placed = customer.order()
    payment = payment_of(placed)
    payment.expires_at = timezone.now() - dt.timedelta(minutes=5)
    payment.save(update_fields=["expires_at"])
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    assert (payment_of(placed).status, order_of(placed).status) == ("late", "needs_review")
    return placed

"""Fixtures for the payments tests: the local chain's assets and placing orders through the real service."""

from __future__ import annotations

import pytest

from tests.servers import free_port

# A stand-in token contract on the local chain (EIP-55); quotes only read the chain's height.
LOCAL_USDC_CONTRACT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


@pytest.fixture
def local_eth(db):
    from payments.models import Asset

    return Asset.objects.select_related("network").get(network__slug="local", symbol="ETH")


@pytest.fixture
def local_usdc(db):
    from payments.models import Asset, Network

    return Asset.objects.create(
        network=Network.objects.get(slug="local"),
        symbol="USDC",
        name="USD Coin (local test token)",
        decimals=6,
        contract=LOCAL_USDC_CONTRACT,
        usd_stable=True,
    )


@pytest.fixture
def closed_rpc_url() -> str:
    """A loopback URL where nothing listens: every request to it is refused at once."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def order_request(order_payload):
    """Build an OrderRequest the way the form and the API do; fields override the payload."""
    from shop.order_input import build_order_request

    def build(**fields):
        return build_order_request({**order_payload, **fields}, language="en")

    return build

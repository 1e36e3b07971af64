"""What the scan asks of each provider, in /metrics (issue 26): calls, requests, bytes and rate limits per network
and provider (its host: the URL's path and user part carry API keys), and a pass that ends on rate limits says so
in the network's health while the network stays offered."""

from __future__ import annotations

import pytest

from payments.rpc import RateLimited
from payments.scan import scan_network
from tests.metrics_scrape import scrape, value
from tests.payments.verification.helpers import local
from tests.payments.verification.rpc_proxy import RpcProxy

API_KEY = "k3y0f7h3sh0p"


@pytest.fixture
def provider(chain, monkeypatch, settings):
    """The `local` network's only provider, reached with an API key in its path, as Infura and Alchemy are."""
    settings.RPC_RETRY_AFTER_MAX_SECONDS = 0
    proxy = RpcProxy(chain.node.url)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{proxy.url}/v3/{API_KEY}")
    yield proxy
    proxy.stop()


def test_metrics_count_what_each_provider_was_asked_and_its_rate_limits(chain, provider, customer, client):
    # Given an open order, and a provider that answers one request in three with 429
    customer.order()
    provider.http_requests = 0  # checkout read the head: not the scan's
    provider.rate_limit_every = 3

    # When two passes run
    scan_network(network=local())
    chain.mine(3)
    scan_network(network=local())

    # Then /metrics counts them under the provider's host, and never shows its key
    samples = scrape(client)
    labels = {"network": "local", "provider": f"127.0.0.1:{provider.port}"}
    assert value(samples, "payments_rpc_rate_limited_total", **labels) == provider.rate_limited > 0
    assert value(samples, "payments_rpc_requests_total", **labels) == provider.http_requests
    assert value(samples, "payments_rpc_calls_total", **labels) >= provider.http_requests
    assert value(samples, "payments_rpc_response_bytes_total", **labels) > 0
    assert API_KEY not in client.get("/metrics").content.decode()


def test_a_pass_that_ends_on_rate_limits_says_so_and_the_network_stays_offered(chain, provider, customer):
    customer.order()
    scan_network(network=local())

    # When every request is answered 429
    provider.rate_limit_every = 1
    with pytest.raises(RateLimited):
        scan_network(network=local())

    # Then the network's health names the rate limits, not an outage, and checkout still offers it
    network = local()
    assert network.rpc_ok is True
    assert network.rpc_error.startswith("rate-limited:")
    assert API_KEY not in network.rpc_error

    # And the next pass that gets answers clears it
    provider.rate_limit_every = None
    scan_network(network=local())
    assert local().rpc_error == ""

"""Several RPC URLs per network: a dead, rate-limiting or stale one is passed over; with none usable the
network is marked down and not offered at checkout until a pass succeeds again."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from payments.models import Credit, Network
from payments.rpc import RpcUnavailable
from payments.scan import scan_network
from tests.payments.verification.helpers import CATALOG_URL, local, payment_of, units
from tests.payments.verification.rpc_proxy import RpcProxy
from tests.servers import Anvil, free_port


def dead_url() -> str:
    """A loopback URL where nothing listens: every request to it is refused at once."""
    return f"http://127.0.0.1:{free_port()}"


def offered_networks(client) -> list[str]:
    response = client.get(CATALOG_URL)
    assert response.status_code == 200
    return [network["slug"] for network in response.json()["networks"]]


@pytest.fixture
def rate_limiting_url():
    """A tiny HTTP server on loopback that answers every request with 429 Too Many Requests."""
    hits = []

    class TooManyRequests(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            hits.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"error": "rate limited"}'
            self.send_response(429)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), TooManyRequests)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def test_a_pass_works_when_the_first_rpc_url_is_dead_and_the_second_alive(
    chain, customer, scan_pass, monkeypatch, client
):
    # Given a paid USDC order, and a network whose first RPC URL does not answer
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{dead_url()},{chain.node.url}")

    # When the verifier passes
    output = scan_pass()

    # Then it used the second URL: the payment is confirmed and the network is healthy and offered
    assert payment_of(placed).status == "confirmed"
    assert "RPC unavailable" not in output
    network = local()
    assert (network.rpc_ok, network.head_block) == (True, chain.head())
    assert "local" in offered_networks(client)


def test_a_network_whose_rpc_urls_are_all_dead_is_marked_down_and_not_offered_until_a_pass_succeeds(
    chain, monkeypatch, client
):
    # Given the local network, offered at checkout after a good pass
    scan_network(network=local())
    assert "local" in offered_networks(client)

    # When every RPC URL of it is dead
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{dead_url()},{dead_url()}")
    with pytest.raises(RpcUnavailable):
        scan_network(network=local())

    # Then it is marked down with the reason, and checkout no longer offers it
    network = local()
    assert network.rpc_ok is False
    assert "ConnectionError" in network.rpc_error
    assert "local" not in offered_networks(client)

    # When an URL answers again and a pass succeeds
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", chain.node.url)
    scan_network(network=local())

    # Then the network is healthy and offered again
    assert (local().rpc_ok, local().rpc_error) == (True, "")
    assert "local" in offered_networks(client)


def test_scan_payments_reports_a_network_that_is_down_and_exits_with_an_error(chain, monkeypatch, scan_pass):
    # Given every RPC URL of the local network is dead
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", dead_url())

    # When the scan_payments command runs, then it says which network is down and exits with status 1
    with pytest.raises(SystemExit) as exit_info:
        scan_pass()
    assert exit_info.value.code == 1
    assert local().rpc_ok is False


def test_a_node_whose_head_is_hours_old_counts_as_down(db, monkeypatch, no_other_networks, client):
    # Given a node whose chain stopped two hours ago, and a network that wants a head under a minute old
    node = Anvil("--timestamp", str(int(time.time()) - 2 * 3600))
    try:
        monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", node.url)
        Network.objects.filter(slug="local").update(max_head_age_seconds=60)

        # When the verifier passes
        with pytest.raises(RpcUnavailable, match="old") as raised:
            scan_network(network=local())
    finally:
        node.stop()

    # Then the node counts as down whatever it says about syncing, the network is marked down with the reason
    assert "StaleHead" in str(raised.value)
    network = local()
    assert network.rpc_ok is False
    assert "s old" in network.rpc_error
    assert "local" not in offered_networks(client)


def test_a_pass_passes_over_a_stale_node_for_a_fresh_one(chain, customer, scan_pass, monkeypatch):
    # Given a paid USDC order, a network that wants a head under a minute old, and a first RPC URL whose
    # node stopped two hours ago
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    stale = Anvil("--timestamp", str(int(time.time()) - 2 * 3600))
    try:
        monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{stale.url},{chain.node.url}")
        Network.objects.filter(slug="local").update(max_head_age_seconds=60)

        # When the verifier passes
        scan_pass()
    finally:
        stale.stop()

    # Then it used the fresh node: the payment is confirmed and the network healthy
    assert payment_of(placed).status == "confirmed"
    assert (local().rpc_ok, local().head_block) == (True, chain.head())


def test_a_pass_works_when_the_first_rpc_url_answers_429_and_the_second_is_alive(
    chain, customer, scan_pass, monkeypatch, rate_limiting_url
):
    # Given a paid USDC order, and a first RPC URL that rate-limits every request
    url, hits = rate_limiting_url
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{url},{chain.node.url}")

    # When the verifier passes
    scan_pass()

    # Then it was turned away by the first URL, used the second, and the payment is confirmed
    assert hits
    assert payment_of(placed).status == "confirmed"
    assert local().rpc_ok is True


@pytest.fixture
def slow_proxy():
    """An HTTP proxy on loopback that forwards JSON-RPC to a node and answers after `delay` seconds:
    a healthy but distant node, as a public RPC provider is."""
    proxies: list[RpcProxy] = []

    def start(target: str, delay: float) -> str:
        proxies.append(RpcProxy(target, delay=delay))
        return proxies[-1].url

    yield start
    for proxy in proxies:
        proxy.stop()


@pytest.mark.parametrize("stale_height", ["behind", "as_high"])
def test_a_stale_node_is_not_asked_for_the_rest_of_a_pass_once_its_head_was_found_old(
    chain, customer, scan_pass, monkeypatch, slow_proxy, stale_height
):
    # Given a USDC transfer detected at 1 of 2 confirmations, on a network that wants a head under a minute old
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    scan_pass()
    assert payment_of(placed).status == "detected"
    Network.objects.filter(slug="local").update(max_head_age_seconds=60)
    # And, as first RPC URL, a node whose chain stopped two hours ago (it never saw the transfer; its height is
    # below the real one, or as high), then the healthy node behind a link where each answer takes 0.6 s
    stale = Anvil("--timestamp", str(int(time.time()) - 2 * 3600))
    try:
        if stale_height == "as_high":
            stale.mine(chain.head() + 10)
        monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{stale.url},{slow_proxy(chain.node.url, 0.6)}")

        # When the verifier passes
        scan_pass()
    finally:
        stale.stop()

    # Then the pass went through on the healthy node, and the stale node's answers did not un-credit the
    # transfer as a "reorg"
    credit = Credit.objects.get(tx_hash=sent.tx_hash.lower())
    assert credit.removed_at is None, f"credit removed: {credit.removed_reason}"
    assert payment_of(placed).status in ("detected", "confirmed")
    assert local().rpc_ok is True

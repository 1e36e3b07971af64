"""A network with nothing to watch costs at most a head read a minute (issue 26): no address watched and no money
in flight, a pass reads the head and the chain id (the network's health stays current) and nothing else,
IDLE_PASS_SECONDS apart."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from payments.networks import rpc_client
from payments.rpc import RpcUnavailable
from payments.scan import scan_network
from tests.payments.verification.helpers import local


def test_an_idle_network_costs_one_head_read_a_minute(chain, settings):
    # Given no order at all, and the production interval
    settings.IDLE_PASS_SECONDS = 60
    start = timezone.now()
    client = rpc_client(local())

    # When the scan passes every 15 seconds for two minutes
    for seconds in range(0, 120, 15):
        scan_network(network=local(), client=client, now=start + dt.timedelta(seconds=seconds))

    # Then two head reads were made (with the chain id), and the network is known to be up
    assert client.calls == 4
    network = local()
    assert (network.rpc_ok, network.head_block) == (True, chain.head())


def test_an_idle_network_that_stops_answering_is_marked_down(chain, settings, monkeypatch):
    settings.IDLE_PASS_SECONDS = 60
    scan_network(network=local())
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", "http://127.0.0.1:9")
    with pytest.raises(RpcUnavailable):
        scan_network(network=local(), now=timezone.now() + dt.timedelta(seconds=61))
    assert local().rpc_ok is False  # and checkout stops offering it

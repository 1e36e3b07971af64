"""A shop that can grow: two orders placed through the API (one awaiting payment, one paid), then as many
more orders, nodes, assets, credits, events and preparation runs as a test asks for."""

from __future__ import annotations

import os

import pytest
from django.db import transaction
from django.test import Client

from orders.models import Order
from orders.payment_outcome import OrderPaymentOutcome, order_payment_outcome
from payments.models import Asset, Network
from tests.perf.bulk import (
    FIRST_BULK_INDEX,
    assets_bulk,
    credits_bulk,
    events_bulk,
    nodes_bulk,
    open_orders_bulk,
    released_holds_bulk,
    runs_bulk,
)
from tests.placing import order_posted


class World:
    def __init__(self, client: Client, make_node, order_payload: dict) -> None:
        self.client = client
        self.make_node = make_node
        self.order_payload = order_payload
        self.size = 0
        self.awaiting = self.place()
        self.paid = self.place()
        with transaction.atomic():
            order_payment_outcome(order_id=self.paid["order"].pk, outcome=OrderPaymentOutcome.PAID, reason="test")

    def place(self) -> dict:
        """An order through the API, as a customer places it (a node is added for it)."""
        self.make_node()
        body = order_posted(self.client, self.order_payload)
        body["order"] = Order.objects.get(reference=body["reference"])
        return body

    def grow(self, size: int) -> None:
        """Up to `size` of each: other open orders, free nodes, assets, preparation runs, and credits, events
        and past holds on the paid order."""
        more = size - self.size
        assert more > 0
        network = Network.objects.get(slug="local")
        eth = Asset.objects.get(network=network, symbol="ETH")
        payments = open_orders_bulk(more, asset=eth, first_index=FIRST_BULK_INDEX + self.size, prefix="B2-PERF-")
        nodes = nodes_bulk(more, prefix=f"perf-node-{self.size}-")
        assets_bulk(more, network=network, prefix=f"P{self.size}-")
        paid = self.paid["order"]
        credits_bulk(paid.payment, more, first_block=1 + self.size)
        events_bulk(paid, more)
        released_holds_bulk(paid, nodes)
        runs_bulk([payment.order for payment in payments], nodes)
        self.size = size


@pytest.fixture
def world(db, anvil, make_node, order_payload, monkeypatch) -> World:
    for name in list(os.environ):  # only `local` is configured, whatever the shell has
        if name.startswith("CHAIN_RPC_URLS_") and name != "CHAIN_RPC_URLS_LOCAL":
            monkeypatch.delenv(name)
    return World(Client(), make_node, order_payload)

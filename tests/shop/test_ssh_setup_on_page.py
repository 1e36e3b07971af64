"""The order page of a running rental gives the node's `known_hosts` line and `~/.ssh/config` block (issue 41:
SSH that works on the first try), escaped as text; a node with no pinned key a customer's ssh could use (the
local development driver) gets neither, rather than a line that would not work."""

from __future__ import annotations

import datetime as dt
from html import unescape
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from orders.models import Order
from provisioning.drivers.base import public_key_fingerprint
from provisioning.models import AccessGrant
from tests.shop.helpers import order_running

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl root@node"


def handed_over(place_order, node) -> tuple[dict, Order]:
    placed = place_order(lots=1, duration_days=7)
    order = order_running(placed["reference"])
    AccessGrant.objects.create(
        order=order, node=node, account="o-b2test", host="203.0.113.7", port=2222,
        host_key_fingerprint=public_key_fingerprint(node.host_key) if node.host_key else "local",
        ssh_key_fingerprint=order.ssh_key_fingerprint, ends_at=timezone.now() + dt.timedelta(days=7),
    )  # fmt: skip
    return placed, order


def test_a_running_rental_shows_the_known_hosts_line_and_the_ssh_config_block(make_node, place_order):
    node = make_node(name="node-a", host_key=HOST_KEY)
    for _ in range(3):
        make_node()
    placed, order = handed_over(place_order, node)

    page = unescape(Client().get(urlsplit(placed["status_url"]).path).content.decode())

    alias = f"{order.reference.lower()}-node-a"
    assert f"{alias} ssh-ed25519 {HOST_KEY.split()[1]}" in page
    for line in (f"Host {alias}", "HostName 203.0.113.7", "Port 2222", "User o-b2test", f"HostKeyAlias {alias}",
                 "StrictHostKeyChecking yes"):  # fmt: skip
        assert line in page
    assert f"ssh {alias}" in page


def test_a_development_node_without_a_pinned_key_gives_no_setup(make_node, place_order):
    node = make_node(name="node-a")
    for _ in range(3):
        make_node()
    placed, _order = handed_over(place_order, node)

    page = Client().get(urlsplit(placed["status_url"]).path).content.decode()

    assert 'class="ssh-setup"' not in page and "known_hosts" not in page

"""Operators register nodes with `add_node`, and a migrated database already holds the default catalog."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from orders.models import Duration, LotSpec, Preparation
from payments.models import Network
from provisioning.models import Node

CATALOG_URL = "/api/v1/catalog/"


def add_node(*args: str) -> str:
    out = StringIO()
    call_command("add_node", *args, stdout=out)
    return out.getvalue()


def lots_available(client) -> int:
    return client.get(CATALOG_URL).json()["lots_available"]


def test_adding_a_local_node_offers_one_more_lot(client, db):
    before = lots_available(client)

    output = add_node("gpu-local-1", "--driver", "local")

    assert "node gpu-local-1 registered" in output
    assert lots_available(client) == before + 1
    node = Node.objects.get(name="gpu-local-1")
    assert (node.driver, node.host, node.gpu_model, node.gpu_count) == ("local", "127.0.0.1", "NVIDIA B200", 2)


def test_adding_an_ssh_node_with_its_address_offers_one_more_lot(client, db):
    before = lots_available(client)

    add_node("gpu-ssh-1", "--driver", "ssh", "--host", "10.0.0.7", "--port", "2222", "--user", "shop")

    assert lots_available(client) == before + 1
    node = Node.objects.get(name="gpu-ssh-1")
    assert (node.driver, node.host, node.port, node.user) == ("ssh", "10.0.0.7", 2222, "shop")


@pytest.mark.parametrize(
    "args",
    [
        ["--driver", "ssh"],
        ["--driver", "ssh", "--user", "shop"],
        ["--driver", "ssh", "--host", "10.0.0.7"],
    ],
)
def test_an_ssh_node_without_host_and_user_is_refused_with_a_clear_error(client, db, args):
    before = lots_available(client)

    with pytest.raises(CommandError, match="an ssh node needs --host and --user"):
        add_node("gpu-ssh-2", *args)

    assert not Node.objects.filter(name="gpu-ssh-2").exists()
    assert lots_available(client) == before


def test_a_port_out_of_range_is_refused(db):
    with pytest.raises(CommandError, match="--port must be between 1 and 65535"):
        add_node("gpu-ssh-3", "--driver", "ssh", "--host", "10.0.0.7", "--user", "shop", "--port", "70000")

    assert not Node.objects.filter(name="gpu-ssh-3").exists()


def test_running_add_node_again_updates_the_node_instead_of_adding_another(client, db):
    add_node("gpu-a", "--driver", "ssh", "--host", "10.0.0.7", "--user", "shop")
    after_first = lots_available(client)

    output = add_node("gpu-a", "--driver", "ssh", "--host", "10.0.0.8", "--user", "ops", "--port", "2200")

    assert "node gpu-a updated" in output
    assert Node.objects.filter(name="gpu-a").count() == 1
    node = Node.objects.get(name="gpu-a")
    assert (node.host, node.user, node.port) == ("10.0.0.8", "ops", 2200)
    assert lots_available(client) == after_first


def test_a_migrated_database_holds_the_default_catalog(anvil, client, db):
    lot = LotSpec.objects.get()
    assert (lot.gpus_per_lot, lot.gpu_model, lot.gpu_memory_gb, lot.memory_type) == (2, "NVIDIA B200", 180, "HBM3e")
    prices = dict(Duration.objects.filter(active=True).values_list("days", "price_per_lot_usd"))
    assert prices == {3: Decimal("899.00"), 7: Decimal("1990.00"), 30: Decimal("7900.00")}
    assert list(Preparation.objects.filter(active=True).values_list("slug", flat=True)) == [
        "bare-node",
        "pytorch-blackwell",
        "two-card-distributed",
    ]
    assert set(Network.objects.values_list("slug", flat=True)) >= {
        "ethereum",
        "arbitrum",
        "base",
        "optimism",
        "polygon",
        "bsc",
        "local",
    }

    catalog = client.get(CATALOG_URL).json()

    assert (catalog["lot"]["gpus_per_lot"], catalog["lot"]["gpu_memory_gb"]) == (2, 180)
    assert [(d["days"], d["price_per_lot_usd"]) for d in catalog["durations"]] == [
        (3, "899.00"),
        (7, "1990.00"),
        (30, "7900.00"),
    ]
    assert all(d["purpose"] for d in catalog["durations"])
    assert len(catalog["preparations"]) == 3
    local = next(network for network in catalog["networks"] if network["slug"] == "local")
    assert local["chain_id"] == 31337
    assert {"symbol": "ETH", "decimals": 18, "contract": None}.items() <= local["assets"][0].items()


def test_a_node_reached_without_root_is_registered_with_its_installed_access_tool(db):
    # Given docs/production.md's command for a node whose login is shop-ops
    add_node("gpu-sudo", "--driver", "ssh", "--host", "10.0.0.9", "--user", "shop-ops",
             "--access-tool", "/usr/local/sbin/b200-access")  # fmt: skip

    # Then the shop will run that tool with sudo on it; a relative path (no sudo rule can name it) is refused
    assert Node.objects.get(name="gpu-sudo").access_tool == "/usr/local/sbin/b200-access"
    with pytest.raises(CommandError, match="absolute path"):
        add_node("gpu-sudo-2", "--driver", "ssh", "--host", "10.0.0.9", "--user", "shop-ops", "--access-tool", "b200")


def test_a_nodes_scratch_folders_are_registered_and_a_relative_one_is_refused(db):
    add_node("gpu-scratch", "--driver", "local", "--scratch", "/scratch", "--scratch", "/nvme/tmp")

    assert Node.objects.get(name="gpu-scratch").scratch_folders() == ["/scratch", "/nvme/tmp"]
    with pytest.raises(CommandError, match="scratch_paths: 'scratch' is not a normalised absolute path"):
        add_node("gpu-scratch-2", "--driver", "local", "--scratch", "scratch")

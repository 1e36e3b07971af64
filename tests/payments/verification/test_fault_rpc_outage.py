"""Every RPC provider of a network down, then back (issue 6, faults).

While no provider answers, the network is hidden at checkout (the catalog API and the wizard) and /healthz
says why. Transfers keep arriving on the chain meanwhile. When the providers are back, the next passes go on
from the stored cursor, range after range, without skipping a block: what was paid during the outage is
credited, nothing is lost. Two loopback providers (tests/payments/verification/rpc_proxy.py) stand between the verifier
and a real anvil; "down" means their ports refuse connections.
"""

from __future__ import annotations

import re

import pytest

from payments.models import Credit, Network, ScanCursor
from payments.rpc import RpcUnavailable
from payments.scan import MAX_RANGES_PER_PASS, scan_network
from tests.payments.verification.helpers import CATALOG_URL, local, order_of, payment_of, units

BLOCKS_PER_RANGE = 2  # small ranges, so that catching up after the outage takes more than one pass
PASS_REACH = MAX_RANGES_PER_PASS * BLOCKS_PER_RANGE


def offered_networks(client) -> list[str]:
    response = client.get(CATALOG_URL)
    assert response.status_code == 200
    return [network["slug"] for network in response.json()["networks"]]


def wizard_payment_choices(client, ssh_public_key: str) -> list[str]:
    """The asset/network options the wizard's payment step offers, after the two steps before it."""
    client.post("/order/", {"lots": 1, "duration_days": 7, "preparation": "pytorch-blackwell", "continue": "1"})
    client.post(
        "/order/contact/",
        {
            "first_name": "Ada",
            "last_name": "Lovelace",
            "email": "ada@example.org",
            "ssh_public_key": ssh_public_key,
            "terms": "on",
        },
    )
    page = client.get("/order/payment/")
    assert page.status_code == 200
    return re.findall(r'name="payment_option" value="([^"]+)"', page.content.decode())


def test_a_network_whose_every_rpc_is_down_is_hidden_and_its_next_passes_credit_what_was_paid_meanwhile(
    chain, providers, customer, client, ssh_public_key, make_node
):
    # Given two open USDC orders, a healthy pass that stored the cursor, and the network offered at checkout
    Network.objects.filter(slug="local").update(max_block_range=BLOCKS_PER_RANGE)
    first, second = customer.order(), customer.order()
    make_node()  # a free lot, for the wizard
    scan_network(network=local())
    cursor_before = ScanCursor.objects.get(network=local()).next_block
    assert "local" in offered_networks(client)
    assert "local:USDC" in wizard_payment_choices(client, ssh_public_key)

    # When every provider of the network goes down, and a pass tries
    for proxy in providers:
        proxy.down()
    with pytest.raises(RpcUnavailable) as raised:
        scan_network(network=local())

    # Then the pass names both providers, the network is hidden from the catalog and the wizard,
    # and /healthz says why
    for proxy in providers:
        assert f"127.0.0.1:{proxy.port}: ConnectionError" in str(raised.value)
    assert local().rpc_ok is False
    assert "local" not in offered_networks(client)
    assert [choice for choice in wizard_payment_choices(client, ssh_public_key) if choice.startswith("local:")] == []
    health = client.get("/healthz").json()["networks"]["local"]
    assert (health["ok"], health["verifier"]["ok"]) == (False, False)
    assert "ConnectionError" in health["verifier"]["error"]

    # When, during the outage, both customers pay, blocks apart, further than one pass reaches
    early = chain.wallet.pay_token(chain.usdc, first["payment"]["address"], units(first))
    chain.mine(PASS_REACH + 20)
    late = chain.wallet.pay_token(chain.usdc, second["payment"]["address"], units(second))
    chain.mine(5)
    head = chain.head()
    # And the providers come back, and two passes run
    for proxy in providers:
        proxy.up()
    one = scan_network(network=local())
    after_one = ScanCursor.objects.get(network=local()).next_block
    two = scan_network(network=local())

    # Then the first pass went on from the stored cursor and stopped at its reach; the second went on from there
    # to the head: every block of the outage was read, none skipped
    assert one.from_block <= cursor_before
    assert one.to_block == one.from_block + PASS_REACH - 1 < late.block_number
    assert after_one == one.to_block + 1
    assert two.from_block <= after_one
    assert two.to_block == head
    assert ScanCursor.objects.get(network=local()).next_block == head + 1
    # And both transfers are credited, in their blocks, for their full amounts: both orders are paid
    credits = {credit.tx_hash: credit for credit in Credit.objects.filter(removed_at__isnull=True)}
    assert set(credits) == {early.tx_hash.lower(), late.tx_hash.lower()}
    assert credits[early.tx_hash.lower()].block_number == early.block_number
    assert credits[late.tx_hash.lower()].block_number == late.block_number
    for placed in (first, second):
        assert int(payment_of(placed).received_base_units) == units(placed)
        assert (payment_of(placed).status, order_of(placed).status) == ("confirmed", "paid")
    # And the network is healthy and offered again, in the catalog, the wizard and /healthz
    assert local().rpc_ok is True
    assert "local" in offered_networks(client)
    assert "local:USDC" in wizard_payment_choices(client, ssh_public_key)
    assert client.get("/healthz").json()["networks"]["local"]["ok"] is True

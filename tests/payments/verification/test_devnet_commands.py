"""`manage.py devnet setup` deploys the test tokens and the ETH price feed once; `manage.py devnet pay` pays an
order for a demo."""

from __future__ import annotations

import io

from django.core.management import call_command

from payments.models import Asset
from tests.payments.verification.helpers import order_steps, payment_of, units
from tests.servers import rpc


def devnet(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("devnet", *args, stdout=out)
    return out.getvalue().splitlines()


def test_devnet_setup_deploys_the_test_tokens_once_and_then_finds_them_present(bare_chain):
    # Given a fresh local chain with no token on it

    # When `devnet setup` runs twice
    first = devnet("setup")
    second = devnet("setup")

    # Then the first run deploys USDC and USDT and registers them, the second finds them present
    usdc = Asset.objects.get(network__slug="local", symbol="USDC")
    usdt = Asset.objects.get(network__slug="local", symbol="USDT")
    feed = Asset.objects.get(network__slug="local", symbol="ETH").price_feed
    assert first == [
        f"USDC: deployed at {usdc.contract}",
        f"USDT: deployed at {usdt.contract}",
        f"ETH price feed: deployed at {feed}",
    ]
    assert second == [
        f"USDC: present at {usdc.contract}",
        f"USDT: present at {usdt.contract}",
        f"ETH price feed: present at {feed}",
    ]
    assert (usdc.decimals, usdt.decimals, usdc.usd_stable) == (6, 6, True)
    assert rpc(bare_chain.node.url, "eth_getCode", [usdc.contract, "latest"]) != "0x"
    assert Asset.objects.filter(network__slug="local", symbol__in=["USDC", "USDT"]).count() == 2


def test_devnet_pay_pays_an_order_and_a_scan_pass_confirms_it(bare_chain, customer, scan_pass):
    # Given the test tokens deployed by `devnet setup`, and an order in USDC
    devnet("setup")
    placed = customer.order()

    # When `devnet pay` pays it (the reference typed in lower case), and a block later the verifier passes
    lines = devnet("pay", placed["reference"].lower())
    bare_chain.mine(1)
    scan_pass()

    # Then the command printed the transaction, and the order is paid with exactly the quoted amount
    seen = customer.read(placed)
    assert lines == [f"paid {placed['reference'].lower()}: {seen['payment']['tx_hashes'][0]}"]
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert payment_of(placed).received_base_units == units(placed)
    assert order_steps(placed)[-1] == ("awaiting_payment", "paid", "system")


def test_devnet_pay_pays_an_eth_order_with_a_value_transfer(bare_chain, customer, scan_pass):
    # Given an order in the local chain's ETH
    placed = customer.order(asset="ETH")

    # When `devnet pay` pays it, and a block later the verifier passes
    devnet("pay", placed["reference"])
    bare_chain.mine(1)
    scan_pass()

    # Then the order is paid with exactly the quoted wei
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(units(placed))

"""`manage.py devnet mint <address> <amount> [--asset USDC]` gives a wallet of one's own test tokens on the
local chain (the test token's public `mint(address,uint256)`), and ETH for gas, to pay from that wallet."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from eth_abi import decode
from eth_account import Account

from payments.models import Asset
from tests.payments.verification.chain import call_data
from tests.servers import rpc


def devnet(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("devnet", *args, stdout=out)
    return out.getvalue().splitlines()


def balance(url: str, token: str, holder: str) -> int:
    data = call_data("balanceOf(address)", ["address"], [holder])
    answer = rpc(url, "eth_call", [{"to": token, "data": data}, "latest"])
    return decode(["uint256"], bytes.fromhex(answer[2:]))[0]


def test_devnet_mint_gives_a_wallet_of_ones_own_test_usdc_then_usdt(bare_chain):
    # Given the test tokens deployed by `devnet setup`, and a wallet of the developer's own
    devnet("setup")
    wallet = Account.create().address
    usdc = Asset.objects.get(network__slug="local", symbol="USDC").contract
    usdt = Asset.objects.get(network__slug="local", symbol="USDT").contract

    # When they mint 250.5 USDC (the default asset) and 3 USDT to it, the address typed in lower case
    minted = devnet("mint", wallet.lower(), "250.5")
    devnet("mint", wallet, "3", "--asset", "usdt")

    # Then the wallet holds exactly those amounts, in the tokens' 6-decimal base units
    assert balance(bare_chain.node.url, usdc, wallet) == 250_500_000
    assert balance(bare_chain.node.url, usdt, wallet) == 3_000_000
    assert len(minted) == 1 and minted[0].startswith(f"minted 250.5 USDC to {wallet}: 0x")


def test_devnet_mint_sends_eth_for_gas_from_a_funded_account(bare_chain):
    wallet = Account.create().address

    devnet("mint", wallet, "0.25", "--asset", "ETH")

    assert int(rpc(bare_chain.node.url, "eth_getBalance", [wallet, "latest"]), 16) == 250_000_000_000_000_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["0x1234", "10"], "'0x1234' is not an address"),
        (["0x" + "ab" * 20, "ten"], "'ten' is not a number"),
        (["0x" + "ab" * 20, "-1"], "the amount must be positive"),
        (["0x" + "ab" * 20, "0.0000001"], "USDC has 6 decimals"),
        (["0x" + "ab" * 20, "10", "--asset", "DAI"], "DAI is not an asset of the local chain"),
    ],
)
def test_devnet_mint_refuses_what_it_cannot_mint_with_a_message(bare_chain, args, message):
    devnet("setup")

    with pytest.raises(CommandError, match=message):
        devnet("mint", *args)


def test_devnet_mint_of_a_test_token_before_setup_says_to_run_setup(bare_chain):
    with pytest.raises(CommandError, match="run `manage.py devnet setup` first"):
        devnet("mint", "0x" + "ab" * 20, "10")

"""The local development chain: test USDC/USDT and an ETH/USD price feed deployed from their committed artifacts,
and payments sent from anvil's funded development accounts (anvil signs for them: no key is held here)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from eth_abi import encode
from eth_utils import function_signature_to_4byte_selector, is_address, to_checksum_address

from payments.models import Asset, Network, PaymentRequest
from payments.rpc import RpcClient

ARTIFACT = Path(__file__).resolve().parent / "contracts" / "TestToken.json"
FEED_ARTIFACT = Path(__file__).resolve().parent / "contracts" / "DevPriceFeed.json"
FEED_DECIMALS = 8  # as Chainlink's USD feeds
TEST_TOKENS = [("USDC", "Test USD Coin", 6), ("USDT", "Test Tether USD", 6)]
TEST_TOKEN_SYMBOLS = {symbol for symbol, _, _ in TEST_TOKENS}


class DevnetError(Exception):
    pass


def _selector(signature: str) -> str:
    return "0x" + function_signature_to_4byte_selector(signature).hex()


def send_and_wait(client: RpcClient, tx: dict[str, Any]) -> dict[str, Any]:
    tx_hash = client.call("eth_sendTransaction", [tx])
    receipt: dict[str, Any] | None = client.call("eth_getTransactionReceipt", [tx_hash])
    if receipt is None:  # a chain with a block time: mine now rather than wait
        client.call("evm_mine", [])
        receipt = client.call("eth_getTransactionReceipt", [tx_hash])
    if receipt is None or int(receipt["status"], 16) != 1:
        raise DevnetError(f"transaction {tx_hash} failed")
    return receipt


def funded_account(client: RpcClient) -> str:
    accounts: list[str] = client.call("eth_accounts")
    if not accounts:
        raise DevnetError("the chain has no unlocked development account (is it anvil?)")
    return accounts[0]


def deploy_token(client: RpcClient, *, name: str, symbol: str, decimals: int) -> str:
    artifact = json.loads(ARTIFACT.read_text())
    data = artifact["bytecode"] + encode(["string", "string", "uint8"], [name, symbol, decimals]).hex()
    receipt = send_and_wait(client, {"from": funded_account(client), "data": data})
    return to_checksum_address(receipt["contractAddress"])


def deploy_price_feed(client: RpcClient, *, decimals: int, description: str, answer: int) -> str:
    """A DevPriceFeed answering `answer` (in units of 10**-decimals USD) as of now; anyone may change it."""
    artifact = json.loads(FEED_ARTIFACT.read_text())
    data = artifact["bytecode"] + encode(["uint8", "string", "int256"], [decimals, description, answer]).hex()
    receipt = send_and_wait(client, {"from": funded_account(client), "data": data})
    return to_checksum_address(receipt["contractAddress"])


def _has_code(client: RpcClient, address: str | None) -> bool:
    return bool(address) and client.call("eth_getCode", [address, "latest"]) != "0x"


def _setup_native_price_feed(client: RpcClient, network: Network) -> str:
    """The local coin's USD feed, answering DEV_NATIVE_USD_RATE until someone sets another answer."""
    coin = Asset.objects.get(network=network, contract__isnull=True)
    if _has_code(client, coin.price_feed):
        return f"{coin.symbol} price feed: present at {coin.price_feed}"
    answer = int(Decimal(settings.DEV_NATIVE_USD_RATE).scaleb(FEED_DECIMALS))
    coin.price_feed = deploy_price_feed(
        client, decimals=FEED_DECIMALS, description=f"{coin.symbol} / USD (development)", answer=answer
    )
    coin.save(update_fields=["price_feed"])
    return f"{coin.symbol} price feed: deployed at {coin.price_feed}"


def devnet_setup(*, client: RpcClient) -> list[str]:
    """Register the local network's test tokens and its coin's price feed, deploying them where the chain lacks
    their code."""
    network = Network.objects.get(slug="local")
    chain_id = client.chain_id()
    if chain_id != network.chain_id:
        raise DevnetError(f"the chain answers with id {chain_id}, the local network is {network.chain_id}")
    lines = []
    for symbol, name, decimals in TEST_TOKENS:
        asset = Asset.objects.filter(network=network, symbol=symbol).first()
        if asset is not None and _has_code(client, asset.contract):
            lines.append(f"{symbol}: present at {asset.contract}")
            continue
        contract = deploy_token(client, name=name, symbol=symbol, decimals=decimals)
        Asset.objects.update_or_create(
            network=network,
            symbol=symbol,
            defaults={"name": name, "decimals": decimals, "contract": contract, "usd_stable": True, "enabled": True},
        )
        lines.append(f"{symbol}: deployed at {contract}")
    lines.append(_setup_native_price_feed(client, network))
    return lines


def devnet_pay(*, client: RpcClient, payment: PaymentRequest, amount: Decimal | None = None) -> str:
    """Pay an order's request (or `amount` whole units of its asset) from a funded development account."""
    units = int(payment.amount_base_units) if amount is None else int(amount.scaleb(payment.decimals))
    if units <= 0:
        raise DevnetError("the amount must be positive")
    sender = funded_account(client)
    if payment.contract is None:
        receipt = send_and_wait(client, {"from": sender, "to": payment.address, "value": hex(units)})
    else:
        mint = _selector("mint(address,uint256)") + encode(["address", "uint256"], [sender, units]).hex()
        send_and_wait(client, {"from": sender, "to": payment.contract, "data": mint})
        transfer = (
            _selector("transfer(address,uint256)") + encode(["address", "uint256"], [payment.address, units]).hex()
        )
        receipt = send_and_wait(client, {"from": sender, "to": payment.contract, "data": transfer})
    tx_hash: str = receipt["transactionHash"]
    return tx_hash


def devnet_mint(*, client: RpcClient, symbol: str, to: str, amount: Decimal) -> str:
    """Give any address `amount` whole units of a local asset, so that a developer can pay from a wallet of their
    own: a test token through its public `mint`, the chain's coin (gas) sent from a funded development account."""
    if not is_address(to):
        raise DevnetError(f"{to!r} is not an address")
    symbol = symbol.upper()
    asset = Asset.objects.filter(network__slug="local", symbol=symbol).first()
    if symbol in TEST_TOKEN_SYMBOLS and (asset is None or not asset.contract):
        raise DevnetError(f"{symbol} is not on the local chain yet: run `manage.py devnet setup` first")
    if asset is None:
        raise DevnetError(f"{symbol} is not an asset of the local chain")
    units = amount.scaleb(asset.decimals)
    if units != units.to_integral_value():
        raise DevnetError(f"{asset.symbol} has {asset.decimals} decimals: {amount} is finer than that")
    if units <= 0:
        raise DevnetError("the amount must be positive")
    sender, to = funded_account(client), to_checksum_address(to)
    if asset.contract is None:
        receipt = send_and_wait(client, {"from": sender, "to": to, "value": hex(int(units))})
    else:
        arguments = encode(["address", "uint256"], [to, int(units)]).hex()
        data = _selector("mint(address,uint256)") + arguments
        receipt = send_and_wait(client, {"from": sender, "to": asset.contract, "data": data})
    tx_hash: str = receipt["transactionHash"]
    return tx_hash

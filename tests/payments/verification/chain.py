"""Paying like a customer's wallet does: raw transactions signed here, never by the project or by anvil.

The key is anvil's well-known first development account; anvil funds it with 10,000 ETH at genesis.
"""

from __future__ import annotations

import time
import urllib.error
from dataclasses import dataclass

from eth_abi import encode
from eth_account import Account
from eth_utils import function_signature_to_4byte_selector, to_checksum_address

from tests.servers import Anvil, rpc

DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
DEV_ADDRESS = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
GAS = 100_000
MAX_FEE = 2_000_000_000  # 2 gwei: well above anvil's base fee on a quiet chain
PRIORITY_FEE = 1_000_000_000


def call_data(signature: str, types: list[str], values: list) -> str:
    return "0x" + function_signature_to_4byte_selector(signature).hex() + encode(types, values).hex()


def wait_for_receipt(url: str, tx_hash: str, seconds: float = 10.0) -> dict:
    """anvil mines a transaction it receives at once, but answers eth_sendRawTransaction a little before. Asking
    is a read: a connection anvil reset under load (seen in CI) is asked again."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            receipt = rpc(url, "eth_getTransactionReceipt", [tx_hash])
        except (ConnectionError, urllib.error.URLError):
            receipt = None
        if receipt is not None:
            return receipt
        assert time.monotonic() < deadline, f"{tx_hash} was not mined within {seconds} s (is the chain automining?)"
        time.sleep(0.02)


@dataclass(frozen=True)
class Sent:
    """A transaction as the chain accepted it, with its signed bytes (a reorg test can re-insert them)."""

    tx_hash: str
    raw: str
    block_number: int
    contract: str | None = None  # the address a contract creation made


class Wallet:
    """A customer's wallet on one chain (a JSON-RPC URL), signing with a private key it holds."""

    def __init__(self, url: str, key: str = DEV_KEY) -> None:
        self.url = url
        self.account = Account.from_key(key)
        self.chain_id = int(rpc(url, "eth_chainId"), 16)

    @property
    def address(self) -> str:
        return self.account.address

    def sign(self, *, to: str | None, data: str = "0x", value: int = 0, gas: int = GAS) -> tuple[str, str]:
        """(tx hash, raw signed tx), not sent yet. `to` None creates a contract from `data`."""
        nonce = int(rpc(self.url, "eth_getTransactionCount", [self.address, "pending"]), 16)
        tx = {
            "type": 2,
            "chainId": self.chain_id,
            "nonce": nonce,
            **({"to": to_checksum_address(to)} if to else {}),
            "value": value,
            "data": data,
            "gas": gas,
            "maxFeePerGas": MAX_FEE,
            "maxPriorityFeePerGas": PRIORITY_FEE,
        }
        signed = Account.sign_transaction(tx, self.account.key)
        return "0x" + signed.hash.hex().removeprefix("0x"), "0x" + signed.raw_transaction.hex().removeprefix("0x")

    def send(
        self, *, to: str | None, data: str = "0x", value: int = 0, must_succeed: bool = True, gas: int = GAS
    ) -> Sent:
        """Sign, send, and return once mined (anvil mines each transaction at once); fails if it reverted."""
        tx_hash, raw = self.sign(to=to, data=data, value=value, gas=gas)
        assert rpc(self.url, "eth_sendRawTransaction", [raw]).lower() == tx_hash.lower()
        receipt = wait_for_receipt(self.url, tx_hash)
        assert int(receipt["status"], 16) == 1 or not must_succeed, f"{tx_hash} reverted"
        return Sent(
            tx_hash=tx_hash,
            raw=raw,
            block_number=int(receipt["blockNumber"], 16),
            contract=receipt.get("contractAddress"),
        )

    def mint(self, token: str, units: int) -> Sent:
        """The test token lets anyone mint: give this wallet `units` base units."""
        return self.send(
            to=token, data=call_data("mint(address,uint256)", ["address", "uint256"], [self.address, units])
        )

    def transfer(self, token: str, to: str, units: int) -> Sent:
        """An ERC-20 transfer(to, units) from this wallet."""
        return self.send(to=token, data=call_data("transfer(address,uint256)", ["address", "uint256"], [to, units]))

    def pay_token(self, token: str, to: str, units: int) -> Sent:
        """Mint what is needed, then transfer it: one Transfer log to `to`, in the last block."""
        self.mint(token, units)
        return self.transfer(token, to, units)

    def pay_native(self, to: str, wei: int) -> Sent:
        return self.send(to=to, value=wei)

    def deploy_forwarder(self) -> str:
        """A minimal contract that sends the value it receives on to the address in its calldata, as a
        smart-contract wallet or an exchange's batching contract does (an internal transfer, no log)."""
        return self.send(to=None, data=FORWARDER_INIT).contract

    def pay_native_through(self, forwarder: str, to: str, wei: int) -> Sent:
        return self.send(to=forwarder, data="0x" + encode(["address"], [to]).hex(), value=wei)


# Runtime, 25 bytes: CALL(gas, calldataload(0), callvalue, 0, 0, 0, 0); if it failed, revert.
FORWARDER_RUNTIME = (
    "6000600060006000"  # retLength, retOffset, argsLength, argsOffset = 0
    "34"  # CALLVALUE
    "600035"  # CALLDATALOAD(0): the recipient
    "5af1"  # GAS, CALL
    "15601357"  # ISZERO, PUSH1 0x13, JUMPI: to the revert when the call failed
    "00"  # STOP
    "5b60006000fd"  # 0x13: JUMPDEST, REVERT(0, 0)
)
FORWARDER_INIT = (
    "0x"
    + f"60{len(FORWARDER_RUNTIME) // 2:02x}600c600039"  # CODECOPY(0, 12, size)
    + f"60{len(FORWARDER_RUNTIME) // 2:02x}6000f3"  # RETURN(0, size)
    + FORWARDER_RUNTIME
)


@dataclass
class Chain:
    """The `local` network for one test: the node, the customer's wallet on it, and the test tokens."""

    node: Anvil
    wallet: Wallet
    usdc: str = ""
    usdt: str = ""

    def mine(self, blocks: int = 1) -> None:
        self.node.mine(blocks)

    def head(self) -> int:
        return self.node.block_number()

"""A real anvil with a test token, deposit addresses funded from anvil's development account, and the signer run
as a subprocess, the way the treasurer runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from eth_abi import encode
from eth_account import Account

from tests.servers import ROOT, Anvil

Account.enable_unaudited_hdwallet_features()

# The signer's mnemonic in these tests (BIP-39's all-zero entropy vector; anvil's own is another one).
MNEMONIC = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
OTHER_MNEMONIC = "test test test test test test test test test test test junk"
GAS_PATH = "m/44'/60'/0'/1/0"
ETH = 10**18
ARTIFACT = ROOT / "payments" / "contracts" / "TestToken.json"


def derived(path: str, mnemonic: str = MNEMONIC) -> str:
    return Account.from_mnemonic(mnemonic, account_path=path).address


def deposit_path(index: int) -> str:
    return f"m/44'/60'/0'/0/{index}"


@dataclass
class Chain:
    node: Anvil
    dev: str = ""
    token: str = ""
    receipts: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dev = self.node.call("eth_accounts")[0]
        bytecode = json.loads(ARTIFACT.read_text())["bytecode"]
        data = bytecode + encode(["string", "string", "uint8"], ["Test USD Coin", "USDC", 6]).hex()
        self.token = self.send({"from": self.dev, "data": data})["contractAddress"]

    def send(self, tx: dict) -> dict:
        tx_hash = self.node.call("eth_sendTransaction", [tx])
        deadline = time.monotonic() + 10
        # Anvil mines each transaction at once, but its receipt can show a moment later.
        while (
            receipt := self.node.call("eth_getTransactionReceipt", [tx_hash])
        ) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert receipt is not None and int(receipt["status"], 16) == 1
        return receipt

    def fund(self, to: str, wei: int) -> None:
        self.send({"from": self.dev, "to": to, "value": hex(wei)})

    def mint(self, to: str, units: int) -> None:
        data = "0x40c10f19" + encode(["address", "uint256"], [to, units]).hex()  # mint(address,uint256)
        self.send({"from": self.dev, "to": self.token, "data": data})

    def eth(self, address: str) -> int:
        return int(self.node.call("eth_getBalance", [address, "latest"]), 16)

    def tokens(self, address: str) -> int:
        data = "0x70a08231" + encode(["address"], [address]).hex()  # balanceOf(address)
        return int(self.node.call("eth_call", [{"to": self.token, "data": data}, "latest"]), 16)

    def nonce(self, address: str) -> int:
        return int(self.node.call("eth_getTransactionCount", [address, "latest"]), 16)

    def receipt(self, tx_hash: str) -> dict:
        return self.node.call("eth_getTransactionReceipt", [tx_hash])

    def transaction(self, tx_hash: str) -> dict:
        return self.node.call("eth_getTransactionByHash", [tx_hash])


def mnemonic_file(directory: Path, mnemonic: str = MNEMONIC, mode: int = 0o600) -> Path:
    path = directory / "mnemonic.txt"
    path.write_text(mnemonic + "\n")
    path.chmod(mode)
    return path


# The caps these tests' treasurer sets, well above their plans' refunds: a test of the cap passes its own after them.
CAPS = ("--max-refunds-usd", "10000", "--max-refunds-native", "10")


def run_signer(
    plan: dict | Path,
    mnemonic: Path,
    rpc_url: str,
    *extra: str,
    directory: Path,
    treasury: str | None,
    answer: str | None = None,
):
    """`python -m payments.signer` in a process of its own, with no Django settings in its environment, pinned to
    `treasury` and CAPS (None: no pin flags, a `--config` in `extra` gives them); with `--yes`, unless `answer` is
    given: then that is what the treasurer types on stdin. Its state directory (the refund register) is in
    `directory`, shared by the test's runs and no other test's."""
    if isinstance(plan, dict):
        path = directory / "plan.json"
        path.write_text(json.dumps(plan))
        plan = path
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
    environment["XDG_STATE_HOME"] = str(directory / "state")
    command = [sys.executable, "-m", "payments.signer", "--plan", str(plan), "--mnemonic-file", str(mnemonic)]
    pins = [] if treasury is None else ["--treasury", treasury, *CAPS]
    pins += ["--yes"] if answer is None else []
    return subprocess.run(
        [*command, "--rpc-url", rpc_url, *pins, *extra],
        cwd=ROOT,
        env=environment,
        input=answer or "",
        capture_output=True,
        text=True,
        timeout=300,
    )

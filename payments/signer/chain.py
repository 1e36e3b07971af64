"""The chain as the signer sees it, through web3.py: balances, fees, nonces, broadcasting and receipts."""

from __future__ import annotations

from typing import Literal

from eth_abi import decode, encode
from eth_typing import ChecksumAddress, HexAddress, HexStr
from hexbytes import HexBytes
from web3 import HTTPProvider, Web3
from web3.exceptions import ContractLogicError, TransactionNotFound, Web3RPCError
from web3.types import TxReceipt, Wei

BALANCE_OF = bytes.fromhex("70a08231")  # balanceOf(address)
TRANSFER = bytes.fromhex("a9059cbb")  # transfer(address,uint256)
SYMBOL, DECIMALS = bytes.fromhex("95d89b41"), bytes.fromhex("313ce567")  # symbol(), decimals()

# A fee cap one base-fee step (EIP-1559: at most +12.5% a block) above the next block's, so that a transfer
# is mined even if the next block is full; the native sweep alone uses the exact next base fee (see sweep_fee).
HEADROOM_NUMERATOR, HEADROOM_DENOMINATOR = 9, 8
# The most gas one transfer may cost: a token's transfer costs 30,000-70,000 (USDT, USDC, their proxies). A plan could
# name a contract of the server's choosing as a token: its "transfer" would burn the gas account's top-up in fees.
MAX_TRANSFER_GAS = 200_000


class WouldRevert(Exception):
    """The node's estimate says the transfer would revert (a recipient that refuses coin, a token that refuses
    the transfer), or cost more gas than any transfer should: it is not sent."""


def transfer_data(to: str, amount: int) -> bytes:
    return TRANSFER + encode(["address", "uint256"], [to, amount])


def _checksummed(address: str) -> ChecksumAddress:
    """An address as web3's types name it: the signer's are checksummed where they are read (plan.py, pins.py), and
    web3 checks them again (the NewTypes change nothing when the code runs)."""
    return ChecksumAddress(HexAddress(HexStr(address)))


class Chain:
    def __init__(self, url: str, *, receipt_timeout: float = 180) -> None:
        # No retries inside web3: a dropped RPC ends the run, and the journal makes the rerun safe.
        provider = HTTPProvider(url, request_kwargs={"timeout": 30}, exception_retry_configuration=None)
        self.w3 = Web3(provider)
        self.receipt_timeout = receipt_timeout

    def chain_id(self) -> int:
        return self.w3.eth.chain_id

    def native_balance(self, address: str) -> int:
        return self.w3.eth.get_balance(_checksummed(address), "latest")

    def token_balance(self, contract: str, address: str) -> int:
        answer = self.w3.eth.call({"to": contract, "data": BALANCE_OF + encode(["address"], [address])}, "latest")
        return int.from_bytes(answer, "big")

    def token_metadata(self, contract: str) -> tuple[str, int | None]:
        """(symbol, decimals) as the token contract answers them, never as a plan says: ("", None) for what does
        not answer (no code, a revert); a bytes32 symbol (old tokens) is read too."""
        try:
            answer = bytes(self.w3.eth.call({"to": contract, "data": DECIMALS}, "latest"))
        except (ContractLogicError, Web3RPCError, ValueError):
            return "", None
        if len(answer) != 32 or int.from_bytes(answer, "big") > 77:  # no code answers b"": not a token
            return "", None
        decimals = int.from_bytes(answer, "big")
        try:
            answer = bytes(self.w3.eth.call({"to": contract, "data": SYMBOL}, "latest"))
        except (ContractLogicError, Web3RPCError, ValueError):
            answer = b""
        try:
            (symbol,) = decode(["string"], answer)
        except Exception:  # not an ABI string: a bytes32, or nothing
            symbol = answer[:32].rstrip(b"\0").decode("utf-8", "replace")
        # Printable characters only: a symbol is printed to the treasurer, who must not see forged lines.
        return "".join(ch for ch in symbol if ch.isprintable()).strip()[:32], decimals

    def balance(self, contract: str | None, address: str) -> int:
        return self.native_balance(address) if contract is None else self.token_balance(contract, address)

    def _next_base_fee_and_tip(self) -> tuple[int, int]:
        # eth_feeHistory's last base fee is the next block's (EIP-1559 computes it from the latest block).
        history = self.w3.eth.fee_history(1, "latest")
        return int(history["baseFeePerGas"][-1]), int(self.w3.eth.max_priority_fee)

    def fee(self) -> tuple[int, int]:
        """(max fee per gas, priority fee) for a transfer: the next block's base fee plus one step, plus the tip."""
        base, tip = self._next_base_fee_and_tip()
        return base * HEADROOM_NUMERATOR // HEADROOM_DENOMINATOR + tip, tip

    def sweep_fee(self) -> tuple[int, int]:
        """The native sweep's fee: exactly the next block's base fee plus the tip, so that balance minus gas x
        this cap leaves the address at 0 when it is mined in the next block; if the base fee rises first, the
        sweep waits in the pool until it falls back (it never pays more than it reserved)."""
        base, tip = self._next_base_fee_and_tip()
        return base + tip, tip

    def estimate(self, sender: str, to: str, *, value: int = 0, data: bytes = b"") -> int:
        try:
            gas = int(self.w3.eth.estimate_gas({"from": sender, "to": to, "value": Wei(value), "data": data}))
        except (ContractLogicError, Web3RPCError) as error:
            raise WouldRevert(f"a transfer from {sender} to {to} would fail: {error}") from error
        if gas > MAX_TRANSFER_GAS:
            raise WouldRevert(
                f"a transfer from {sender} to {to} would cost {gas} gas, above the {MAX_TRANSFER_GAS} gas a token "
                "transfer may cost: not sent"
            )
        return gas

    def nonce(self, address: str, block: Literal["latest", "pending"] = "pending") -> int:
        return self.w3.eth.get_transaction_count(_checksummed(address), block)

    def receipt(self, tx_hash: str) -> TxReceipt | None:
        try:
            return self.w3.eth.get_transaction_receipt(HexStr(tx_hash))
        except TransactionNotFound:
            return None

    def known(self, tx_hash: str) -> bool:
        try:
            self.w3.eth.get_transaction(HexStr(tx_hash))
            return True
        except TransactionNotFound:
            return False

    def broadcast(self, raw: bytes, tx_hash: str) -> None:
        try:
            self.w3.eth.send_raw_transaction(HexBytes(raw))
        except Web3RPCError:
            # "already known", or mined meanwhile: the same bytes are in, which is all a broadcast is for.
            if self.receipt(tx_hash) is None and not self.known(tx_hash):
                raise

    def wait(self, tx_hash: str) -> TxReceipt:
        return self.w3.eth.wait_for_transaction_receipt(HexStr(tx_hash), timeout=self.receipt_timeout, poll_latency=0.1)

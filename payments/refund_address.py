"""The address a customer gives for a refund: checked before it is stored, so money is never sent where it
cannot be used or where it only comes back to the shop.

Refused: anything that is not an EIP-55 checksummed address (a checksum catches a mistyped character; a wallet
shows its address that way), the zero address, a token contract (a transfer to it is lost), and the shop's own
deposit addresses (the money would come back as a new credit), its treasury and its gas account (the money
would stay with the shop, booked as a sweep or a top-up). A contract that is not a token (a multisig
wallet) is accepted.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from eth_utils import is_checksum_address, is_hex_address, to_checksum_address

from core.input_errors import OrderInputError
from payments.addresses import gas_account_address
from payments.models import Network, PaymentRequest
from payments.networks import rpc_client, treasury_address
from payments.rpc import RpcError, RpcResponseError

ZERO = "0x" + "0" * 40
TOTAL_SUPPLY = "0x18160ddd"  # totalSupply(): every ERC-20 answers it


def refund_address_check(address: str, *, network: Network) -> str:
    """The address, checksummed, or OrderInputError("address", ...) saying what is wrong with it."""
    address = (address or "").strip()
    if not is_hex_address(address):
        raise OrderInputError("address", _("An address is 0x followed by 40 hexadecimal characters."))
    if not is_checksum_address(address):
        raise OrderInputError(
            "address",
            _("This address is not in its checksummed form (EIP-55): copy it from your wallet, with its capitals."),
        )
    if address.lower() == ZERO:
        raise OrderInputError("address", _("The zero address burns what is sent to it: give your own address."))
    if PaymentRequest.objects.filter(address__iexact=address).exists():
        raise OrderInputError("address", _("This is one of the shop's own deposit addresses: give your own."))
    if address.lower() == treasury_address(network):
        raise OrderInputError("address", _("This is the shop's treasury, not your wallet: give your own address."))
    if address.lower() == gas_account_address().lower():
        raise OrderInputError("address", _("This is the shop's gas account, not your wallet: give your own address."))
    if _is_token_contract(address, network):
        raise OrderInputError("address", _("This is a token contract, not a wallet: give your wallet's address."))
    return to_checksum_address(address)


def _is_token_contract(address: str, network: Network) -> bool:
    """Code at the address that answers totalSupply(). An RPC that cannot tell refuses the address for now."""
    client = rpc_client(network)
    try:
        code = client.call("eth_getCode", [address, "latest"])
        if code in (None, "0x", "0x0"):
            return False
        try:
            supply = client.call("eth_call", [{"to": address, "data": TOTAL_SUPPLY}, "latest"])
        except RpcResponseError:  # reverted: a contract without totalSupply(), such as a wallet contract
            return False
    except RpcError:
        raise OrderInputError(
            "address", _("The address cannot be checked on-chain right now: try again in a minute.")
        ) from None
    return isinstance(supply, str) and len(supply) >= 66

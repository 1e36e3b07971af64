"""`{% load wallet_pay %}`: what the "Pay with wallet" button (static/js/wallet-pay.js) hands a browser wallet.

A wallet that does not know the order's network answers `wallet_switchEthereumChain` with 4902; the script then
asks it to add the network (EIP-3085) with the parameters below. They name only the public RPC endpoint each
chain publishes for anyone, never the shop's own (CHAIN_RPC_URLS_*, which may carry a provider's API key). A
network not listed (Ethereum, which every wallet knows, and the local development chain) is not added: the page
asks the customer to add it in their wallet first.
"""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString

register = template.Library()

# chain id: (native coin's symbol, its name, the chain's public RPC, its block explorer)
PUBLIC_CHAINS: dict[int, tuple[str, str, str, str]] = {
    42161: ("ETH", "Ether", "https://arb1.arbitrum.io/rpc", "https://arbiscan.io"),
    8453: ("ETH", "Ether", "https://mainnet.base.org", "https://basescan.org"),
    10: ("ETH", "Ether", "https://mainnet.optimism.io", "https://optimistic.etherscan.io"),
    137: ("POL", "Polygon Ecosystem Token", "https://polygon-rpc.com", "https://polygonscan.com"),
    56: ("BNB", "BNB", "https://bsc-dataseed.bnbchain.org", "https://bscscan.com"),
}


def add_chain_parameters(*, chain_id: int, network_name: str) -> dict[str, Any] | None:
    """`wallet_addEthereumChain`'s parameter for the chain, or None where no public RPC is known."""
    known = PUBLIC_CHAINS.get(int(chain_id))
    if known is None:
        return None
    symbol, name, rpc_url, explorer = known
    return {
        "chainId": hex(int(chain_id)),
        "chainName": network_name,
        "nativeCurrency": {"name": name, "symbol": symbol, "decimals": 18},
        "rpcUrls": [rpc_url],
        "blockExplorerUrls": [explorer],
    }


@register.filter
def wallet_units(payment: dict[str, Any]) -> str:
    """The base units the wallet is asked to send: what is still missing (all of it until something arrived, the
    rest of an underpaid one), so that a second press never pays twice. "0" when nothing is missing."""
    missing = int(payment["amount_base_units"]) - int(payment.get("received_base_units") or 0)
    return str(max(0, missing))


@register.filter
def wallet_add_chain(payment: dict[str, Any]) -> SafeString:
    """The payment's (`payment_fields`) network as JSON for a data attribute; empty when it cannot be added."""
    parameters = add_chain_parameters(chain_id=payment["chain_id"], network_name=payment["network_name"])
    return SafeString(escape(json.dumps(parameters))) if parameters else SafeString("")

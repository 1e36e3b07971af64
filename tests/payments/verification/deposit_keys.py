"""Deposit addresses whose keys the test holds, as a thief or the treasurer's signer would: the shared setup of
the tests that move money out of a deposit address (outflows, staff notices, metrics, the ops console).

Import `known_keys` into a test module to make it autouse there."""

from __future__ import annotations

import pytest
from bip_utils import Bip39SeedGenerator, Bip44, Bip44Changes, Bip44Coins

from tests.payments.verification.chain import Wallet
from tests.payments.verification.helpers import payment_of, units
from tests.servers import rpc

# A well-known BIP-39 test vector: its keys guard nothing anywhere.
TEST_MNEMONIC = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
ACCOUNT = Bip44.FromSeed(Bip39SeedGenerator(TEST_MNEMONIC).Generate(), Bip44Coins.ETHEREUM).Purpose().Coin().Account(0)
TREASURY = "0x00000000000000000000000000000000000Ee7A5"
STRANGER = "0x1111111111111111111111111111111111111111"
SECURITY = "security@example.org"


@pytest.fixture(autouse=True)
def known_keys(settings, monkeypatch):
    """Deposit addresses from the test mnemonic; a treasury on the local network; staff who hear of leaks."""
    settings.PAYMENTS_XPUB = ACCOUNT.PublicKey().ToExtended()
    settings.STAFF_ALERT_EMAILS = [SECURITY]
    monkeypatch.setenv("TREASURY_ADDRESS_LOCAL", TREASURY)


def deposit_wallet(chain, placed: dict, gas: bool = True) -> Wallet:
    """The deposit address's own key, as a thief or the treasurer's signer holds it; with coin for gas (set
    directly on the node: no transaction, so nothing for the scan to credit)."""
    payment = payment_of(placed)
    key = ACCOUNT.Change(Bip44Changes.CHAIN_EXT).AddressIndex(payment.derivation_index).PrivateKey().Raw().ToHex()
    wallet = Wallet(chain.node.url, "0x" + key)
    assert wallet.address.lower() == payment.address.lower()
    if gas:
        rpc(chain.node.url, "anvil_setBalance", [wallet.address, hex(10**18)])
    return wallet


def paid(chain, customer, scan_pass, **fields) -> dict:
    placed = customer.order(**fields)
    if fields.get("asset") == "ETH":
        chain.wallet.pay_native(placed["payment"]["address"], units(placed))
    else:
        chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    assert payment_of(placed).status == "confirmed"
    return placed

"""Deposit addresses derive from the account xpub (m/44'/60'/0'/0/<index>) and nothing else is accepted."""

from __future__ import annotations

import re

import pytest
from bip_utils import Bip39MnemonicGenerator, Bip39SeedGenerator, Bip39WordsNum, Bip44, Bip44Changes, Bip44Coins
from Crypto.Hash import keccak
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from config.settings.base import DEV_PAYMENTS_XPUB
from payments.addresses import derive_address, key_fingerprint

DEV_MNEMONIC = "test test test test test test test test test test test junk"
ANVIL_FIRST_ACCOUNTS = [
    "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
]


def account_node(mnemonic: str) -> Bip44:
    seed = Bip39SeedGenerator(mnemonic).Generate()
    return Bip44.FromSeed(seed, Bip44Coins.ETHEREUM).Purpose().Coin().Account(0)


def random_account() -> Bip44:
    return account_node(Bip39MnemonicGenerator().FromWordsNumber(Bip39WordsNum.WORDS_NUM_12).ToStr())


def is_eip55(address: str) -> bool:
    if not re.fullmatch(r"0x[0-9a-fA-F]{40}", address):
        return False
    digits = address[2:]
    digest = keccak.new(digest_bits=256, data=digits.lower().encode()).hexdigest()
    expected = "".join(c.upper() if int(h, 16) >= 8 else c.lower() for c, h in zip(digits, digest[:40], strict=True))
    return digits == expected


def test_the_development_mnemonic_derives_exactly_anvils_first_accounts():
    xpub = account_node(DEV_MNEMONIC).PublicKey().ToExtended()

    assert [derive_address(i, xpub=xpub) for i in range(3)] == ANVIL_FIRST_ACCOUNTS


def test_the_projects_development_key_is_not_anvils_well_known_mnemonic(anvil):
    funded = {address.lower() for address in anvil.call("eth_accounts")}
    assert len(funded) == 10

    addresses = [derive_address(i, xpub=DEV_PAYMENTS_XPUB) for i in range(1000)]

    assert funded.isdisjoint(address.lower() for address in addresses)
    assert len(set(addresses)) == 1000


def test_the_default_setting_is_the_development_key(settings):
    assert settings.PAYMENTS_XPUB == DEV_PAYMENTS_XPUB
    assert derive_address(7) == derive_address(7, xpub=DEV_PAYMENTS_XPUB)


def test_every_derived_address_is_checksummed_per_eip55():
    xpub = account_node(DEV_MNEMONIC).PublicKey().ToExtended()
    addresses = [derive_address(i, xpub=DEV_PAYMENTS_XPUB) for i in range(200)]
    addresses += [derive_address(i, xpub=xpub) for i in range(200)]

    assert all(is_eip55(address) for address in addresses)
    assert is_eip55(ANVIL_FIRST_ACCOUNTS[0])
    assert not is_eip55(ANVIL_FIRST_ACCOUNTS[0].lower())


def test_two_keys_get_different_fingerprints_so_their_indexes_never_collide():
    other_xpub = random_account().PublicKey().ToExtended()

    assert key_fingerprint(DEV_PAYMENTS_XPUB) != key_fingerprint(other_xpub)
    assert derive_address(0, xpub=DEV_PAYMENTS_XPUB) != derive_address(0, xpub=other_xpub)


@pytest.mark.parametrize(
    ("kind", "make_key", "message"),
    [
        ("a private account key (xprv)", lambda: random_account().PrivateKey().ToExtended(), "public key"),
        (
            "a change-level public key",
            lambda: random_account().Change(Bip44Changes.CHAIN_EXT).PublicKey().ToExtended(),
            "account-level",
        ),
        (
            "an address-level public key",
            lambda: random_account().Change(Bip44Changes.CHAIN_EXT).AddressIndex(0).PublicKey().ToExtended(),
            "account-level",
        ),
        ("garbage", lambda: "xpub-this-is-not-a-key", "not a valid extended public key"),
        ("an empty value", lambda: " ", "not a valid extended public key"),
    ],
)
def test_a_payments_xpub_that_is_not_an_account_level_public_key_is_refused(kind, make_key, message):
    with override_settings(PAYMENTS_XPUB=make_key()), pytest.raises(ImproperlyConfigured, match=message):
        derive_address(0)

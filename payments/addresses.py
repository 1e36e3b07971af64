"""Watch-only deposit addresses: derived from the account xpub at m/44'/60'/0'/0/<index>.

The server only ever holds the public half of the key; bip-utils refuses to produce a private key
from it, so no code path here can spend.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from bip_utils import Bip44, Bip44Changes, Bip44Coins, Bip44Levels
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@lru_cache(maxsize=4)
def _external_chain(xpub: str) -> Bip44:
    try:
        account = Bip44.FromExtendedKey(xpub, Bip44Coins.ETHEREUM)
    except Exception as exc:  # bip-utils raises several types for a malformed key
        raise ImproperlyConfigured(f"PAYMENTS_XPUB is not a valid extended public key: {exc}") from None
    if account.Level() != Bip44Levels.ACCOUNT:
        raise ImproperlyConfigured("PAYMENTS_XPUB must be an account-level key (m/44'/60'/0')")
    if not account.IsPublicOnly():
        raise ImproperlyConfigured("PAYMENTS_XPUB must be a public key: the server holds no private key")
    return account.Change(Bip44Changes.CHAIN_EXT)


def validate_account_xpub(xpub: str) -> None:
    """Raise ImproperlyConfigured unless `xpub` is an account-level public key (checked at start-up)."""
    _external_chain(xpub)


def derive_address(index: int, xpub: str | None = None) -> str:
    """The EIP-55 checksummed address at external index `index` of the account key."""
    node = _external_chain(xpub or settings.PAYMENTS_XPUB).AddressIndex(index)
    address: str = node.PublicKey().ToAddress()  # bip_utils is untyped
    return address


def gas_account_address(xpub: str | None = None) -> str:
    """The treasurer's gas account, m/44'/60'/0'/1/0 (the internal chain): the server can name it, not spend."""
    return _internal_first(xpub or settings.PAYMENTS_XPUB)


@lru_cache(maxsize=4)
def _internal_first(xpub: str) -> str:
    account = Bip44.FromExtendedKey(xpub, Bip44Coins.ETHEREUM)
    address: str = account.Change(Bip44Changes.CHAIN_INT).AddressIndex(0).PublicKey().ToAddress()  # untyped library
    return address


def key_fingerprint(xpub: str | None = None) -> str:
    """A stable, non-secret name for the account key, so indexes of two keys never collide."""
    return hashlib.sha256((xpub or settings.PAYMENTS_XPUB).encode()).hexdigest()

"""Hypothesis strategies for what people (and scripts) type into forms."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from hypothesis import strategies as st

PUBLIC_KEY = (
    ed25519.Ed25519PrivateKey.generate()
    .public_key()
    .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    .decode()
)
OPENSSH_PRIVATE_KEY = (
    ed25519.Ed25519PrivateKey.generate()
    .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    .decode()
)
RSA_PRIVATE_KEY = (
    rsa.generate_private_key(public_exponent=65537, key_size=2048)
    .private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    .decode()
)
PAYLOADS = [
    "<script>alert('x')</script>",
    "\"'><img src=x onerror=alert(1)>",
    "'; DROP TABLE shop_order; --",
    "' OR '1'='1",
    "{{ settings.SECRET_KEY }}",
    "%(name)s %s {0}",
]
NASTY_TEXT = [
    "",
    " ",
    "\x00",
    "Ada\x00Lovelace",
    "\u202eevil\u202c",  # right-to-left override
    "\u200f\u200e\u061c",  # RTL / LTR / Arabic letter marks
    "\ufeff",
    "😀" * 40,
    "👩🏽‍🔬",
    "\ud800",  # a lone surrogate: invalid UTF-8 once sent
    "a\udfffb",
    "\r\n\t",
    "x" * 101,
    "x" * 151,
    "x" * 2001,
    "é" * 5000,
    *PAYLOADS,
]
# Any code point, lone surrogates included.
ANY_CHARACTER = st.characters(codec=None, exclude_categories=())

texts = st.one_of(
    st.sampled_from(NASTY_TEXT),
    st.text(ANY_CHARACTER, max_size=60),
    st.text(max_size=400),
    st.builds(lambda piece, times: piece * times, st.text(ANY_CHARACTER, min_size=1, max_size=4), st.integers(1, 6000)),
)
numbers = st.one_of(
    st.integers(min_value=-10, max_value=100).map(str),
    st.integers().map(str),
    st.sampled_from(
        ["", " ", "0", "-1", "-0", "+1", "01", " 2 ", "1.0", "1.5", "1e3", "1e400", "NaN", "inf", "-inf", "0x10"]
        + ["١", "²", str(10**100), str(2**64), str(-(2**63)), "9" * 5000]
    ),
    st.floats().map(repr),
    texts,
)


def field_values(*valid: str):
    """A value for one field: left out, a valid one, a number-like string, or any text."""
    choices = [st.none(), numbers, texts]
    if valid:
        choices.insert(1, st.sampled_from(valid))
    return st.one_of(*choices)

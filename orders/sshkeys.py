"""Validating the SSH public key that access will use: one key, a known type, a sound size."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from django.utils.translation import gettext as _

MAX_KEY_CHARS = 16_384
MAX_COMMENT_CHARS = 100
MIN_RSA_BITS = 2048
ALLOWED_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
PRIVATE_KEY_MARKERS = ("PRIVATE KEY", "PuTTY-User-Key-File", "ENCRYPTED", "Proc-Type:")


class SshKeyError(ValueError):
    pass


@dataclass(frozen=True)
class SshPublicKey:
    key_type: str
    data: str  # the base64 key blob: with the type, exactly what a node installs
    bits: int
    comment: str  # sanitised: printable characters, single spaces; shown back, never installed
    fingerprint: str  # SHA256:<base64>, as `ssh-keygen -lf` prints it
    line: str  # the normalised single line the order stores: type, data and the sanitised comment


def looks_like_private_key(text: str | None) -> bool:
    return any(marker in (text or "") for marker in PRIVATE_KEY_MARKERS)


def parse_ssh_public_key(text: str) -> SshPublicKey:
    text = (text or "").strip()
    if not text:
        raise SshKeyError(_("Paste your SSH public key (the contents of a .pub file)."))
    if looks_like_private_key(text):
        raise SshKeyError(
            _("This is a private key: never share it. Paste the public key instead (the file ending in .pub).")
        )
    if len(text) > MAX_KEY_CHARS:
        raise SshKeyError(_("This key is too long to be one SSH public key."))
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise SshKeyError(_("Paste exactly one public key, on one line."))
    parts = lines[0].split(None, 2)
    if len(parts) < 2:
        raise SshKeyError(_("An SSH public key looks like 'ssh-ed25519 AAAA... comment'."))
    key_type, data = parts[0], parts[1]
    later_words = lines[0].split()[1:]
    if key_type in ALLOWED_TYPES and any(word in ALLOWED_TYPES for word in later_words[1:]):
        raise SshKeyError(_("Paste exactly one public key, on one line."))  # a second key in the "comment"
    if key_type not in ALLOWED_TYPES and any(word in ALLOWED_TYPES for word in later_words):
        raise SshKeyError(
            _('Paste the key alone: options before it, such as command="..." or from="...", are not accepted.')
        )
    comment = _sanitised_comment(parts[2] if len(parts) == 3 else "")
    if key_type not in ALLOWED_TYPES:
        if key_type in ("ssh-dss", "ssh-dsa"):
            raise SshKeyError(_("DSA keys are no longer accepted: use an Ed25519 key (ssh-keygen -t ed25519)."))
        raise SshKeyError(
            _("Unknown key type '%(type)s': use ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa.")
            % {"type": key_type[:40]}
        )
    try:
        blob = base64.b64decode(data, validate=True)
    except ValueError:
        raise SshKeyError(_("The key data is not valid base64: copy the whole line again.")) from None
    if _embedded_type(blob) != key_type:
        raise SshKeyError(_("The key data does not match its type: copy the whole line again."))
    bits = _key_bits(key_type, f"{key_type} {data}")
    fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    line = f"{key_type} {data}" + (f" {comment}" if comment else "")
    return SshPublicKey(key_type=key_type, data=data, bits=bits, comment=comment, fingerprint=fingerprint, line=line)


def _sanitised_comment(text: str) -> str:
    """Printable characters only (accents welcome; control and bidi-format characters dropped), one space
    between words: the comment is shown back to the customer and staff, never installed on a node."""
    words = "".join(char if char.isprintable() else " " if char.isspace() else "" for char in text).split()
    return " ".join(words)[:MAX_COMMENT_CHARS].strip()


def _embedded_type(blob: bytes) -> str:
    if len(blob) < 4:
        return ""
    size = int.from_bytes(blob[:4], "big")
    return blob[4 : 4 + size].decode("ascii", errors="replace")


def _key_bits(key_type: str, line: str) -> int:
    # Security-key types (sk-...) are parsed in full too: an Ed25519 key or a P-256 point on the curve,
    # then the application string, and nothing after it.
    try:
        key = load_ssh_public_key(line.encode())
    except (ValueError, TypeError, NotImplementedError):
        raise SshKeyError(_("The key data is damaged or incomplete: copy the whole line again.")) from None
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise SshKeyError(
                _("This RSA key has %(bits)s bits; at least %(min)s are required (Ed25519 is better).")
                % {"bits": key.key_size, "min": MIN_RSA_BITS}
            )
        return key.key_size
    if isinstance(key, ec.EllipticCurvePublicKey):
        return key.curve.key_size
    if isinstance(key, ed25519.Ed25519PublicKey):
        return 256
    raise SshKeyError(_("This key type is not accepted."))

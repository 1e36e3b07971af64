"""Security-key (FIDO, `ssh-keygen -t ed25519-sk / ecdsa-sk`) public keys built by hand, sound and broken.

No hardware token is needed to build a public half: it is the OpenSSH wire format (string type, then for
ed25519-sk a 32-byte key, for ecdsa-sk the curve name and a P-256 point, then the application string).
"""

from __future__ import annotations

import base64
import secrets
import subprocess
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

SK_ED25519 = b"sk-ssh-ed25519@openssh.com"
SK_ECDSA = b"sk-ecdsa-sha2-nistp256@openssh.com"


def ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def p256_point() -> bytes:
    public = ec.generate_private_key(ec.SECP256R1()).public_key()
    return public.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


def off_curve_point() -> bytes:
    point = bytearray(p256_point())
    point[-1] ^= 1  # y no longer satisfies the curve equation
    return bytes(point)


def sk_line(blob: bytes, comment: str = "token@lab") -> str:
    key_type = blob[4 : 4 + int.from_bytes(blob[:4], "big")].decode()
    return f"{key_type} {base64.b64encode(blob).decode()} {comment}"


def sound_sk_ed25519() -> bytes:
    return ssh_string(SK_ED25519) + ssh_string(secrets.token_bytes(32)) + ssh_string(b"ssh:")


def sound_sk_ecdsa() -> bytes:
    return ssh_string(SK_ECDSA) + ssh_string(b"nistp256") + ssh_string(p256_point()) + ssh_string(b"ssh:")


SOUND = {"ed25519-sk": sound_sk_ed25519, "ecdsa-sk": sound_sk_ecdsa}
BROKEN = {
    "ed25519-sk-type-name-only": lambda: ssh_string(SK_ED25519),
    "ed25519-sk-short-key": lambda: ssh_string(SK_ED25519) + ssh_string(secrets.token_bytes(31)) + ssh_string(b"ssh:"),
    "ed25519-sk-no-application": lambda: ssh_string(SK_ED25519) + ssh_string(secrets.token_bytes(32)),
    "ed25519-sk-trailing-bytes": lambda: sound_sk_ed25519() + b"\x00",
    "ecdsa-sk-type-name-only": lambda: ssh_string(SK_ECDSA),
    "ecdsa-sk-other-curve": lambda: (
        ssh_string(SK_ECDSA) + ssh_string(b"nistp384") + ssh_string(p256_point()) + ssh_string(b"ssh:")
    ),
    "ecdsa-sk-point-off-the-curve": lambda: (
        ssh_string(SK_ECDSA) + ssh_string(b"nistp256") + ssh_string(off_curve_point()) + ssh_string(b"ssh:")
    ),
    "ecdsa-sk-no-application": lambda: ssh_string(SK_ECDSA) + ssh_string(b"nistp256") + ssh_string(p256_point()),
}


def ssh_keygen_reads(line: str, folder: Path) -> bool:
    """OpenSSH's verdict on a public key line: `ssh-keygen -l -f` prints its fingerprint, or fails."""
    path = folder / "key.pub"
    path.write_text(line + "\n")
    return subprocess.run(["ssh-keygen", "-l", "-f", str(path)], capture_output=True, check=False).returncode == 0

"""The SSH public key a customer pastes: which keys are accepted, the fingerprint shown, what is refused."""

from __future__ import annotations

import base64
import hashlib
import secrets

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from orders.sshkeys import SshKeyError, parse_ssh_public_key
from tests import security_keys


def openssh_line(private_key, comment: str = "researcher@lab") -> str:
    public = private_key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{public.decode()} {comment}" if comment else public.decode()


def ssh_keygen_fingerprint(line: str) -> str:
    """What `ssh-keygen -lf` prints: SHA256 of the decoded blob, base64 without padding."""
    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def dsa_public_line() -> str:
    """An ssh-dss line built by hand (p, q, g, y as mpints): the type OpenSSH itself dropped."""
    blob = ssh_string(b"ssh-dss") + b"".join(ssh_string(b"\x00" + secrets.token_bytes(size)) for size in (128, 20, 128))
    blob += ssh_string(b"\x00" + secrets.token_bytes(128))
    return "ssh-dss " + base64.b64encode(blob).decode() + " old@lab"


@pytest.mark.parametrize(
    ("make_key", "key_type", "bits"),
    [
        (ed25519.Ed25519PrivateKey.generate, "ssh-ed25519", 256),
        (lambda: ec.generate_private_key(ec.SECP256R1()), "ecdsa-sha2-nistp256", 256),
        (lambda: rsa.generate_private_key(public_exponent=65537, key_size=3072), "ssh-rsa", 3072),
    ],
    ids=["ed25519", "ecdsa-p256", "rsa-3072"],
)
def test_a_sound_public_key_is_accepted_with_the_fingerprint_ssh_keygen_prints(make_key, key_type, bits):
    # Given a public key line as it appears in a .pub file
    line = openssh_line(make_key())

    # When the shop parses it
    key = parse_ssh_public_key(line)

    # Then the key is accepted, with its type, size, comment and the fingerprint ssh-keygen -lf shows
    assert key.key_type == key_type
    assert key.bits == bits
    assert key.comment == "researcher@lab"
    assert key.fingerprint == ssh_keygen_fingerprint(line)
    assert key.line == line


def test_surrounding_whitespace_is_trimmed_from_the_stored_line():
    # Given a key pasted with a trailing newline and leading spaces
    line = openssh_line(ed25519.Ed25519PrivateKey.generate(), comment="")

    # When it is parsed
    key = parse_ssh_public_key(f"   {line}\n\n")

    # Then the line that goes into authorized_keys is the bare key
    assert key.line == line
    assert key.comment == ""


def refused_message(text: str) -> str:
    with pytest.raises(SshKeyError) as refused:
        parse_ssh_public_key(text)
    return str(refused.value)


@pytest.mark.parametrize("text", ["", "   \n  "], ids=["empty", "blank"])
def test_an_empty_key_is_refused(text):
    # Given nothing pasted / When it is parsed / Then the customer is asked for the .pub contents
    assert ".pub" in refused_message(text)


def test_an_openssh_private_key_is_refused_as_a_private_key():
    # Given the contents of ~/.ssh/id_ed25519 instead of id_ed25519.pub
    private = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )

    # When it is parsed / Then the customer is told it is a private key, never to share it
    message = refused_message(private.decode())
    assert "private key" in message
    assert "never share it" in message


def test_a_pem_rsa_private_key_is_refused_as_a_private_key():
    # Given an old-style PEM RSA private key
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    assert private.startswith(b"-----BEGIN RSA PRIVATE KEY-----")

    # When it is parsed / Then it is refused as a private key
    assert "private key" in refused_message(private.decode())


def test_two_keys_at_once_are_refused():
    # Given two public keys on two lines
    text = (
        openssh_line(ed25519.Ed25519PrivateKey.generate()) + "\n" + openssh_line(ed25519.Ed25519PrivateKey.generate())
    )

    # When they are parsed / Then exactly one key is asked for
    assert "exactly one public key" in refused_message(text)


def test_an_rsa_key_of_1024_bits_is_refused_as_too_small():
    # Given a 1024-bit RSA public key
    line = openssh_line(rsa.generate_private_key(public_exponent=65537, key_size=1024))  # noqa: S505 - refusing it is the point

    # When it is parsed / Then the message names its size and the minimum
    message = refused_message(line)
    assert "1024" in message
    assert "2048" in message


def test_a_dsa_key_is_refused():
    # Given an ssh-dss key / When it is parsed / Then DSA is refused and Ed25519 suggested
    message = refused_message(dsa_public_line())
    assert "DSA" in message
    assert "ed25519" in message


def test_an_unknown_key_type_is_refused_naming_the_type():
    # Given a line whose type no OpenSSH server accepts
    data = base64.b64encode(ssh_string(b"ssh-foo") + ssh_string(secrets.token_bytes(32))).decode()

    # When it is parsed / Then the message names the unknown type
    assert "Unknown key type 'ssh-foo'" in refused_message(f"ssh-foo {data} me@lab")


def test_key_data_that_is_not_base64_is_refused():
    # Given a key line whose data was mangled in the copy
    # When it is parsed / Then the customer is told to copy the whole line again
    assert "not valid base64" in refused_message("ssh-ed25519 AAAAC3Nza!!C1lZDI1NTE5 me@lab")


def test_a_prefix_that_does_not_match_the_key_data_is_refused():
    # Given an Ed25519 key blob behind an ssh-rsa prefix
    blob = openssh_line(ed25519.Ed25519PrivateKey.generate()).split()[1]

    # When it is parsed / Then the mismatch is reported
    assert "does not match its type" in refused_message(f"ssh-rsa {blob} me@lab")


def test_a_truncated_key_is_refused():
    # Given an RSA key line cut short (its type still readable, its numbers incomplete)
    blob = base64.b64decode(openssh_line(rsa.generate_private_key(public_exponent=65537, key_size=3072)).split()[1])
    truncated = base64.b64encode(blob[:200]).decode()

    # When it is parsed / Then it is refused as damaged
    assert "damaged or incomplete" in refused_message(f"ssh-rsa {truncated}")


@pytest.mark.parametrize("make_blob", security_keys.SOUND.values(), ids=security_keys.SOUND.keys())
def test_a_sound_security_key_is_accepted_with_the_fingerprint_ssh_keygen_prints(make_blob, tmp_path):
    # Given a security key's public line that OpenSSH itself reads
    line = security_keys.sk_line(make_blob())
    assert security_keys.ssh_keygen_reads(line, tmp_path)

    # When the shop parses it / Then it is accepted as the 256-bit key it is
    key = parse_ssh_public_key(line)
    assert (key.bits, key.fingerprint, key.line) == (256, ssh_keygen_fingerprint(line), line)


@pytest.mark.parametrize("make_blob", security_keys.BROKEN.values(), ids=security_keys.BROKEN.keys())
def test_a_broken_security_key_is_refused_as_damaged(make_blob, tmp_path):
    # Given a security-key line OpenSSH cannot use (its data cut short, off the curve, padded...)
    line = security_keys.sk_line(make_blob())
    assert not security_keys.ssh_keygen_reads(line, tmp_path)

    # When the shop parses it / Then it is refused, never stored for a node
    assert "damaged or incomplete" in refused_message(line)


def test_the_comment_is_kept_readable_and_stripped_of_control_characters():
    # Given a key whose comment holds accents, a tab, an escape sequence and a right-to-left override
    line = openssh_line(ed25519.Ed25519PrivateKey.generate(), comment="")

    # When it is parsed
    key = parse_ssh_public_key(f"{line} josé@laptop\t\x1b[31m \u202eevil")

    # Then the accents stay, the control and format characters are gone, and the key itself is untouched
    assert key.comment == "josé@laptop [31m evil"
    assert key.line == f"{line} josé@laptop [31m evil"
    assert f"{key.key_type} {key.data}" == line

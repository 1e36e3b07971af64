"""The one interface every node driver offers: run a command, put a file, get a file.

A driver is a context manager bound to one node. `workdir` is a private scratch directory on the node,
created when the driver connects and removed when it closes; commands run there and relative paths
given to `put_file` / `get_file` resolve against it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
import re
from dataclasses import dataclass

# Host key algorithms a pinned key may have (OpenSSH names); certificates are not accepted as pins.
HOST_KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class DriverError(Exception):
    """The node cannot be reached or used: connection, authentication or transfer failed."""


class HostKeyMismatch(DriverError):
    """The node did not prove it holds the pinned host key (or no key is pinned): nothing was sent."""


class CommandTimeout(DriverError):
    """A command ran past its timeout; it was killed on the node."""

    def __init__(self, message: str, *, stdout: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


def parse_public_key(line: str) -> tuple[str, bytes]:
    """(type, blob) of an OpenSSH public key line (`TYPE BASE64 [comment]`, or a known_hosts line).

    Raises ValueError when the line holds no well-formed key.
    """
    fields = (line or "").split()
    for index, field in enumerate(fields[:-1]):
        if field in HOST_KEY_TYPES:
            try:
                blob = base64.b64decode(fields[index + 1], validate=True)
            except (binascii.Error, ValueError) as error:
                raise ValueError("the key's base64 part is not valid") from error
            name = field.encode()
            if blob[:4] != len(name).to_bytes(4, "big") or blob[4 : 4 + len(name)] != name:
                raise ValueError(f"the key's data does not match its type {field}")
            return field, blob
    raise ValueError("no OpenSSH public key found (expected `ssh-ed25519 AAAA...`)")


def fingerprint(blob: bytes) -> str:
    """The SHA256 fingerprint of a key blob, as `ssh-keygen -lf` prints it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def public_key_fingerprint(line: str) -> str:
    """The SHA256 fingerprint of an OpenSSH public key line (ValueError when it holds no key)."""
    return fingerprint(parse_public_key(line)[1])


def check_env(env: dict[str, str] | None) -> dict[str, str]:
    env = dict(env or {})
    for name, value in env.items():
        if not ENV_NAME.match(name):
            raise ValueError(f"invalid environment variable name: {name!r}")
        if "\0" in value:
            raise ValueError(f"environment variable {name} contains a NUL byte")
    return env


class Driver:
    """Base class: a context manager around one node. Subclasses implement the five methods."""

    workdir: str = ""
    description: str = "node"

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}>"

    def resolve(self, path: str) -> str:
        """An absolute path on the node: relative paths are taken inside the workdir."""
        if not path:
            raise ValueError("empty path")
        return posixpath.normpath(path if path.startswith("/") else posixpath.join(self.workdir, path))

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        raise NotImplementedError

    def put_file(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        raise NotImplementedError

    def get_file(self, remote_path: str) -> bytes:
        raise NotImplementedError

    def host_key_fingerprint(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def check_argv(argv: list[str], timeout: float) -> list[str]:
    if isinstance(argv, str | bytes) or not argv:
        raise ValueError("argv must be a non-empty list of strings, never a shell string")
    argv = [str(arg) for arg in argv]
    if any("\0" in arg for arg in argv):
        raise ValueError("argv contains a NUL byte")
    if not timeout or timeout <= 0:
        raise ValueError("timeout must be a positive number of seconds")
    return argv

"""Fixtures for the node-access tests: the sandboxed sshd, the operator's driver, customers' keys, access.py."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioning import node_tools
from provisioning.drivers import CommandResult, driver_for, public_key_fingerprint
from provisioning.drivers.ssh import SSHDriver
from tests.sshd import SandboxSshd, sandbox_sshd, stock_sshd  # noqa: F401 - the session fixtures, shared

# The machine's own user database: the tests must leave it exactly as they found it.
MACHINE_USER_FILES = ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/subuid", "/etc/subgid")


def machine_user_files_digest() -> dict[str, str | None]:
    digests = {}
    for path in MACHINE_USER_FILES:
        try:
            digests[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except FileNotFoundError:
            digests[path] = None
    return digests


@dataclass(frozen=True)
class SshKey:
    private: Path
    public: str

    @property
    def fingerprint(self) -> str:
        return public_key_fingerprint(self.public)


@pytest.fixture
def make_ssh_key(tmp_path):
    """A fresh ed25519 key pair made by ssh-keygen, as a customer or an operator would."""
    counter = iter(range(1, 1000))

    def make(comment: str = "researcher@lab") -> SshKey:
        path = tmp_path / f"key{next(counter)}"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
            check=True,
            capture_output=True,
        )
        return SshKey(private=path, public=path.with_suffix(".pub").read_text().strip())

    return make


@pytest.fixture
def sshd(sandbox_sshd) -> SandboxSshd:  # noqa: F811
    return sandbox_sshd


@pytest.fixture
def operator_driver(sshd):
    """The operator's connection to the sandboxed node, as root (what the provisioning tasks use)."""
    with driver_for(sshd.node(), key_file=str(sshd.operator_key_file)) as driver:
        yield driver


def login(sshd: SandboxSshd, account: str, key: SshKey) -> SSHDriver:
    """A customer's SSH connection to the node (paramiko), with the node's host key pinned."""
    return SSHDriver(host=sshd.host, port=sshd.port, user=account, host_key=sshd.host_key, key_file=str(key.private))


class AccessTool:
    """access.py on the node through the operator's driver, working in the sandbox's user database."""

    def __init__(self, driver, sshd: SandboxSshd) -> None:
        self.driver = driver
        self.sshd = sshd
        self.granted: list[str] = []
        driver.put_file(node_tools.source("access.py"), "access.py", mode=0o700)

    def __call__(self, *args: str) -> CommandResult:
        argv = ["python3", "access.py", *args, "--users-prefix", str(self.sshd.sandbox)]
        return self.driver.run(argv, timeout=60)

    def grant(self, account: str, key: SshKey, *, expires: dt.datetime | None = None) -> CommandResult:
        expires = expires or dt.datetime.now(dt.UTC) + dt.timedelta(days=7)
        name = f"key-{secrets.token_hex(4)}.pub"
        self.driver.put_file(key.public.encode() + b"\n", name, mode=0o600)
        self.granted.append(account)
        return self("grant", "--account", account, "--key-file", name, "--expires", expires.isoformat())

    def revoke(self, account: str, *, scratch: tuple[str, ...] = ()) -> CommandResult:
        return self("revoke", "--account", account, *(arg for path in scratch for arg in ("--scratch", path)))

    def show(self, account: str) -> dict:
        result = self("show", "--account", account)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)


@pytest.fixture
def access(operator_driver, sshd):
    tool = AccessTool(operator_driver, sshd)
    yield tool
    for account in tool.granted:  # leave the sandbox as the test found it
        tool.revoke(account)


@pytest.fixture
def stock_access(stock_sshd):  # noqa: F811
    """access.py on a node whose sshd has OpenSSH's stock AuthorizedKeysFile (keys in the tenant's home)."""
    with driver_for(stock_sshd.node(), key_file=str(stock_sshd.operator_key_file)) as driver:
        tool = AccessTool(driver, stock_sshd)
        yield tool
        for account in tool.granted:
            tool.revoke(account)


@pytest.fixture
def account() -> str:
    """A per-order account name, as the shop makes them."""
    return "o-" + secrets.token_hex(5)

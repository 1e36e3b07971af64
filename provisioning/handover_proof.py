"""The hand-over's proof (issue 41): before the rental clock starts, the shop logs in to the node as the order's
account and proves that what the customer will do there works: a command (a login), SFTP, SCP (the legacy protocol
that `scp -O` and older clients speak, through the node's own `scp`), and rsync where the node has it.

The shop never holds the customer's private key, so it proves with one of its own: an ed25519 pair made for this one
proof and held in memory only. The access tool adds its public line beside the customer's (`probe-key`: `restrict`,
gone by itself after PROBE_MINUTES) and takes it out again afterwards, whatever happened. The node's host key is
pinned as the shop's driver pins it (provisioning.drivers.ssh): the node must present exactly `Node.host_key`.

A development node (the local driver, this machine) lets no tenant log in over SSH: there is nothing to prove.
"""

from __future__ import annotations

import io
import re
import secrets
from collections.abc import Callable

import paramiko
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.conf import settings

from fleet.models import Node
from provisioning.access import AccessKeyRefused, _access_tool
from provisioning.drivers.base import Driver, DriverError
from provisioning.drivers.ssh import SSHDriver
from provisioning.models import AccessGrant
from provisioning.node_tools.access import PROBE_COMMENT

PROBE_MINUTES = 10  # the probe line's expiry-time: a proof left half-way cannot open the account for long
PROBE_FILE = ".b200-handover-probe"  # written in the account's home and removed again, over SFTP and over SCP
STEP_SECONDS = 30  # each command or transfer of the proof


class NotProven(Exception):
    """What the customer could not do on the node, in words."""


class AccountLogin(SSHDriver):
    """The node's sshd as the customer meets it: the account's own login, the host key pinned as the shop's driver
    pins it. It writes no scratch folder (the driver's workdir): the proof leaves nothing in the account's name."""

    def _make_workdir(self) -> str:
        return ""

    def command(self, line: str) -> tuple[int, str]:
        """(exit status, output) of a command line run by the account's shell, as `ssh node LINE` runs it."""
        code, stdout, stderr, gave_up = self._exec(line, timeout=STEP_SECONDS)
        if gave_up:
            raise NotProven(f"`{line}` gave no answer within {STEP_SECONDS} s")
        return code, (stdout + stderr).strip()

    def session(self) -> paramiko.Channel:
        return self._live_transport().open_session(timeout=self.connect_timeout)

    def sftp(self) -> paramiko.SFTPClient:
        return self._sftp


def handover_login_proof(
    *, driver: Driver, node: Node, grant: AccessGrant, said: Callable[[str], object] | None = None
) -> str:
    """Prove, as the grant's account, that a login, SFTP and SCP work on the node (rsync too where it is installed):
    "" when proven (or nothing to prove: a node that is not reached over SSH), else the reason. `said` is given the
    line of what was proven, for the run's log. The probe key is removed afterwards, whatever happened."""
    if node.driver != "ssh":
        return ""
    account = grant.account
    key, public_line = probe_key()
    key_file = f"{driver.workdir}/handover-probe.pub"
    problem = proven = ""
    try:
        driver.put_file(public_line.encode(), key_file, mode=0o644)
        minutes = str(PROBE_MINUTES)
        _access_tool(driver, node, "probe-key", "--account", account, "--key-file", key_file, "--minutes", minutes)
        proven = _prove(node=node, grant=grant, key=key)
    except NotProven as exc:
        problem = f"the order's account {account} cannot use {node.name}: {exc}"
    except (AccessKeyRefused, DriverError) as exc:
        problem = f"the login proof as {account} on {node.name} could not run: {exc}"
    finally:
        left = _probe_key_remove(driver=driver, node=node, account=account)
    problem = "; ".join(reason for reason in (problem, left) if reason)
    if not problem and said is not None:
        said(proven)
    return problem


def probe_key() -> tuple[paramiko.PKey, str]:
    """A fresh ed25519 pair, in memory only, and its public line (paramiko cannot make one: cryptography does)."""
    private = Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())
    key = paramiko.Ed25519Key(file_obj=io.StringIO(private.decode()))
    return key, f"{key.get_name()} {key.get_base64()} {PROBE_COMMENT}\n"


def _probe_key_remove(*, driver: Driver, node: Node, account: str) -> str:
    try:
        _access_tool(driver, node, "probe-key", "--account", account, "--remove")
    except DriverError as exc:
        return f"the hand-over's probe key could not be removed from {account} on {node.name}: {exc}"
    return ""


def _prove(*, node: Node, grant: AccessGrant, key: paramiko.PKey) -> str:
    try:
        login = AccountLogin(
            host=grant.host,
            port=grant.port,
            user=grant.account,
            host_key=node.host_key,
            pkey=key,
            connect_timeout=settings.NODE_CONNECT_TIMEOUT_SECONDS,
            name=node.name,
        )
    except DriverError as exc:
        raise NotProven(f"no login with the key just installed for the account (expired, locked?): {exc}") from exc
    with login:
        try:
            _login_works(login)
            _sftp_works(login)
            _scp_works(login)
            rsync = _rsync_works(login)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise NotProven(f"the connection broke: {exc or type(exc).__name__}") from exc
    also = f"rsync {rsync} too" if rsync else "the node has no rsync: not proven"
    return f"login, SFTP and SCP work as {grant.account} ({also})"


def _login_works(login: AccountLogin) -> None:
    code, said = login.command("true")
    if code != 0:
        raise NotProven(f"a command run as the account exited {code}: {said[-300:] or 'nothing said'}")


def _payload() -> bytes:
    return f"b200 hand-over probe {secrets.token_hex(8)}\n".encode()


def _sftp_read_remove(sftp: paramiko.SFTPClient) -> bytes:
    try:
        with sftp.open(PROBE_FILE, "rb") as handle:
            return handle.read()
    finally:
        sftp.remove(PROBE_FILE)


def _sftp_works(login: AccountLogin) -> None:
    payload = _payload()
    try:
        sftp = login.sftp()
        with sftp.open(PROBE_FILE, "wb") as handle:
            handle.write(payload)
        back = _sftp_read_remove(sftp)
    except (DriverError, OSError, paramiko.SSHException, EOFError) as exc:
        raise NotProven(f"SFTP: writing, reading and removing ~/{PROBE_FILE} failed: {exc}") from exc
    if back != payload:
        raise NotProven(f"SFTP: ~/{PROBE_FILE} read back {len(back)} bytes, not the {len(payload)} written")


def _scp_works(login: AccountLogin) -> None:
    """One small file into the home through the node's `scp -t` (the sink of the legacy protocol: each step is
    acknowledged with a zero byte, an error with 1 or 2 and a line), then read back and removed over SFTP."""
    code, found = login.command("command -v scp")
    if code != 0:
        raise NotProven("SCP: the node has no `scp` for the account (install openssh-client)")
    payload = _payload()
    channel = login.session()
    try:
        channel.settimeout(STEP_SECONDS)
        channel.exec_command("scp -t .")
        _scp_ack(channel, f"{found} -t did not start")
        channel.sendall(f"C0644 {len(payload)} {PROBE_FILE}\n".encode())
        _scp_ack(channel, "the file was refused")
        channel.sendall(payload + b"\0")
        _scp_ack(channel, "the file was not stored")
        channel.shutdown_write()
        if not channel.status_event.wait(STEP_SECONDS) or channel.exit_status != 0:
            raise NotProven(f"SCP: the node's scp did not end well (exit {channel.exit_status}){_stderr(channel)}")
    except TimeoutError as exc:
        raise NotProven(f"SCP: the node's scp gave no answer within {STEP_SECONDS} s{_stderr(channel)}") from exc
    finally:
        channel.close()
    try:
        back = _sftp_read_remove(login.sftp())
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise NotProven(f"SCP: the copied ~/{PROBE_FILE} cannot be read back and removed: {exc}") from exc
    if back != payload:
        raise NotProven(f"SCP: ~/{PROBE_FILE} holds {len(back)} bytes, not the {len(payload)} sent")


def _scp_ack(channel: paramiko.Channel, what: str) -> None:
    first = channel.recv(1)
    if first == b"\0":
        return
    if not first:
        raise NotProven(f"SCP: {what}: the node's scp closed the session{_stderr(channel)}")
    message = bytearray()
    while len(message) < 500 and (byte := channel.recv(1)) not in (b"", b"\n"):
        message += byte
    raise NotProven(f"SCP: {what}: {message.decode(errors='replace').strip() or 'an error without words'}")


def _stderr(channel: paramiko.Channel) -> str:
    said = bytearray()
    while channel.recv_stderr_ready() and len(said) < 2000:
        said += channel.recv_stderr(2000)
    text = said.decode(errors="replace").strip()
    return f" ({text[-300:]})" if text else ""


def _rsync_works(login: AccountLogin) -> str:
    """rsync's version where the node has it ("" where it has none: nothing to prove). A whole transfer would need
    the rsync client here; the node's own rsync starting for the account is what a customer's transfer needs there."""
    code, _ = login.command("command -v rsync")
    if code != 0:
        return ""
    code, said = login.command("rsync --version")
    version = re.search(r"version\s+(\S+)", said)
    if code != 0 or not said.startswith("rsync") or version is None:
        raise NotProven(f"rsync is installed but `rsync --version` as the account exited {code}: {said[:300]}")
    return version.group(1)

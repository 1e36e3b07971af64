"""The production driver: SSH (paramiko) to a GPU node whose host key is pinned in the database.

Trust: the node must prove it holds exactly the pinned host key (`Node.host_key`) before anything is
sent; ~/.ssh/known_hosts is never read and unknown keys are never added. The operator's client key
comes from NODE_SSH_KEY_FILE (see `operator_key_file`).

Commands run as `cd WORKDIR && timeout -s KILL SECONDS [env K=V ...] ARGV...`, each argument quoted
with shlex, so the node kills a command that outlives its timeout, with everything it started.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import socket
import stat
import time

import paramiko
from paramiko.ssh_exception import IncompatiblePeer

from provisioning.drivers.base import (
    CommandResult,
    CommandTimeout,
    Driver,
    DriverError,
    HostKeyMismatch,
    check_argv,
    check_env,
    fingerprint,
    parse_public_key,
)

KEY_FILE_ENV = "NODE_SSH_KEY_FILE"
# Seconds the client waits past a command's timeout for the node's `timeout` to report the kill.
KILL_GRACE = 10.0
_CHUNK = 65536


def operator_key_file(path: str | None = None) -> str:
    """The operator's private key for the nodes: `path` when given, else $NODE_SSH_KEY_FILE."""
    path = path or os.environ.get(KEY_FILE_ENV, "")
    if not path:
        raise DriverError(f"{KEY_FILE_ENV} is not set: point it at the operator's SSH private key for the nodes")
    return path


def load_operator_key(path: str | None = None) -> paramiko.PKey:
    path = operator_key_file(path)
    try:
        return paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException as error:
        raise DriverError(f"the SSH key {path} is encrypted; give the service an unencrypted key") from error
    except OSError as error:
        raise DriverError(f"cannot read the SSH key {path}: {error.strerror or error}") from error
    except (paramiko.SSHException, ValueError) as error:
        raise DriverError(f"{path} is not a usable SSH private key: {error}") from error


def _host_key_algorithms(key_type: str) -> list[str]:
    """The host key algorithms to offer so that the node must sign with the pinned key's type."""
    wanted = ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if key_type == "ssh-rsa" else [key_type]
    supported = getattr(paramiko.Transport, "_preferred_keys", wanted)
    return [name for name in wanted if name in supported]


class SSHDriver(Driver):
    def __init__(
        self,
        *,
        host: str,
        port: int = 22,
        user: str = "root",
        host_key: str,
        key_file: str | None = None,
        pkey: paramiko.PKey | None = None,
        connect_timeout: float = 10,
        name: str = "",
    ) -> None:
        self.host, self.port, self.user = host, int(port), user or "root"
        self.description = f"{name or host} ({self.user}@{host}:{self.port})"
        self.connect_timeout = connect_timeout
        self.workdir = ""
        self._transport: paramiko.Transport | None = None
        self._sftp_client: paramiko.SFTPClient | None = None
        if not host:
            raise DriverError(f"{self.description}: the node has no SSH host")
        try:
            self._pinned_type, self._pinned_blob = parse_public_key(host_key)
        except ValueError as error:
            raise HostKeyMismatch(
                f"{self.description}: no valid pinned host key ({error}); pin the node's key "
                "(its /etc/ssh/ssh_host_ed25519_key.pub, checked out of band) before connecting"
            ) from None
        key = pkey or load_operator_key(key_file)
        self._connect(key)
        try:
            self.workdir = self._make_workdir()
        except BaseException:
            self.close()
            raise

    # Connection -------------------------------------------------------------------------------

    def _connect(self, key: paramiko.PKey) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as error:
            raise DriverError(f"cannot connect to {self.description}: {error.strerror or error}") from error
        transport = paramiko.Transport(sock)
        self._transport = transport
        transport.banner_timeout = transport.handshake_timeout = transport.auth_timeout = self.connect_timeout
        algorithms = _host_key_algorithms(self._pinned_type)
        try:
            if not algorithms:
                raise HostKeyMismatch(f"{self.description}: the pinned {self._pinned_type} key type is not supported")
            transport.get_security_options().key_types = algorithms
            started = time.monotonic()
            try:
                # Returns without an exception when the timeout passes first: checked below.
                transport.start_client(timeout=self.connect_timeout)
            except IncompatiblePeer as error:
                if "host key" in str(error):
                    raise HostKeyMismatch(
                        f"{self.description} has no {self._pinned_type} host key, the type of the pinned key "
                        f"{fingerprint(self._pinned_blob)}: is this the right machine?"
                    ) from error
                raise DriverError(f"{self.description}: SSH negotiation failed: {error}") from error
            except (paramiko.SSHException, EOFError, OSError) as error:
                if time.monotonic() - started >= self.connect_timeout * 0.9:
                    raise self._silent(transport) from error
                raise DriverError(
                    f"{self.description}: SSH handshake failed: {error or type(error).__name__}"
                ) from error
            if not transport.initial_kex_done:
                raise self._silent(transport)
            presented = transport.get_remote_server_key().asbytes()
            if presented != self._pinned_blob:
                raise HostKeyMismatch(
                    f"{self.description} presented host key {fingerprint(presented)}, not the pinned "
                    f"{fingerprint(self._pinned_blob)}: refusing to connect (check the node, then re-pin "
                    "its key only if the change is expected)"
                )
            try:
                transport.auth_publickey(self.user, key)
            except paramiko.AuthenticationException as error:
                raise DriverError(
                    f"{self.description} refused the key {key.fingerprint} for {self.user}: "
                    "is it in the node's authorized_keys?"
                ) from error
            except (paramiko.SSHException, EOFError, OSError) as error:
                raise DriverError(f"{self.description}: authentication failed: {error}") from error
            if not transport.is_authenticated():
                raise DriverError(f"{self.description}: the node asks for more than a public key; not supported")
            transport.set_keepalive(30)
        except BaseException:
            transport.close()
            self._transport = None
            raise

    def _silent(self, transport: paramiko.Transport) -> DriverError:
        said = "sent no SSH banner" if not transport.remote_version else "did not finish the SSH handshake"
        return DriverError(
            f"{self.description} accepted the connection but {said} within {self.connect_timeout:g} s: "
            "is sshd hung, or is something else listening on this port?"
        )

    def _make_workdir(self) -> str:
        code, out, err, _ = self._exec("mktemp -d -t b200-node.XXXXXXXXXX", timeout=self.connect_timeout + 20)
        workdir = out.strip()
        if code != 0 or not workdir.startswith("/"):
            raise DriverError(f"{self.description}: cannot create a scratch directory: {err.strip() or out.strip()}")
        return workdir

    @property
    def _sftp(self) -> paramiko.SFTPClient:
        if self._sftp_client is None:
            try:
                client = paramiko.SFTPClient.from_transport(self._live_transport())
            except (paramiko.SSHException, OSError, EOFError) as error:
                raise DriverError(f"{self.description}: SFTP is not available: {error}") from error
            if client is None:  # the server refused the session channel
                raise DriverError(f"{self.description}: SFTP is not available: no channel")
            self._sftp_client = client
        return self._sftp_client

    def _live_transport(self) -> paramiko.Transport:
        if self._transport is None or not self._transport.is_active():
            raise DriverError(f"{self.description}: the SSH connection is closed")
        return self._transport

    # Commands ---------------------------------------------------------------------------------

    def _exec(self, command: str, *, timeout: float) -> tuple[int, str, str, bool]:
        """Run a shell command line; returns (exit code, stdout, stderr, whether the client gave up)."""
        try:
            channel = self._live_transport().open_session(timeout=self.connect_timeout)
            channel.exec_command(command)
            channel.shutdown_write()
        except (paramiko.SSHException, EOFError, OSError) as error:
            raise DriverError(f"{self.description}: cannot start a command: {error}") from error
        stdout, stderr = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        gave_up = False
        try:
            while True:
                progressed = False
                if channel.recv_ready():
                    stdout += channel.recv(_CHUNK)
                    progressed = True
                if channel.recv_stderr_ready():
                    stderr += channel.recv_stderr(_CHUNK)
                    progressed = True
                if channel.exit_status_ready() or channel.closed:
                    break
                if time.monotonic() > deadline:
                    gave_up = True
                    break
                if not progressed:
                    channel.status_event.wait(0.02)
            if not gave_up:
                # The rest of the output, up to EOF (the node sends it before the exit status or just after).
                channel.settimeout(KILL_GRACE)
                while chunk := channel.recv(_CHUNK):
                    stdout += chunk
                while chunk := channel.recv_stderr(_CHUNK):
                    stderr += chunk
        except TimeoutError:
            pass
        except (paramiko.SSHException, EOFError, OSError) as error:
            raise DriverError(f"{self.description}: the connection broke during a command: {error}") from error
        finally:
            code = channel.exit_status if channel.exit_status_ready() else -1
            channel.close()
        return code, stdout.decode(errors="replace"), stderr.decode(errors="replace"), gave_up

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        argv = check_argv(argv, timeout)
        env = check_env(env)
        words = ["timeout", "-s", "KILL", f"{timeout:.3f}"]
        if env:
            words += ["env", *(f"{name}={value}" for name, value in env.items())]
        command = f"cd {shlex.quote(self.workdir)} && {shlex.join(words + argv)}"
        started = time.monotonic()
        code, stdout, stderr, gave_up = self._exec(command, timeout=timeout + KILL_GRACE)
        elapsed = time.monotonic() - started
        # The node's `timeout` kills with SIGKILL: status 137, or a bare signal (-1) when the shell exec'd it.
        if gave_up or (elapsed >= timeout and code in (124, 137, -1)):
            raise CommandTimeout(
                f"{argv[0]} ran past its {timeout:g} s timeout on {self.description} and was killed",
                stdout=stdout,
                stderr=stderr,
            )
        return CommandResult(code, stdout, stderr)

    # Files ------------------------------------------------------------------------------------

    def put_file(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        path = self.resolve(remote_path)
        try:
            self._makedirs(posixpath.dirname(path))
            with self._sftp.open(path, "wb") as handle:
                self._sftp.chmod(path, mode)  # before any data lands in it
                handle.set_pipelined(True)
                handle.write(data)
        except DriverError:
            raise
        except (OSError, paramiko.SSHException, EOFError) as error:
            raise DriverError(f"could not write {path} on {self.description}: {error}") from error

    def _makedirs(self, directory: str) -> None:
        missing = []
        while directory not in ("", "/"):
            try:
                mode = self._sftp.stat(directory).st_mode  # None: the server sent no permissions
                if mode is None or not stat.S_ISDIR(mode):
                    raise DriverError(f"{directory} on {self.description} is not a directory")
                break
            except FileNotFoundError:
                missing.append(directory)
                directory = posixpath.dirname(directory)
        for path in reversed(missing):
            self._sftp.mkdir(path, 0o755)

    def get_file(self, remote_path: str) -> bytes:
        path = self.resolve(remote_path)
        try:
            with self._sftp.open(path, "rb") as handle:
                handle.prefetch()
                return handle.read()
        except DriverError:
            raise
        except (OSError, paramiko.SSHException, EOFError) as error:
            raise DriverError(f"could not read {path} on {self.description}: {error}") from error

    # The rest ---------------------------------------------------------------------------------

    def host_key_fingerprint(self) -> str:
        return fingerprint(self._pinned_blob)

    def close(self) -> None:
        if self._transport is None:
            return
        try:
            if self._sftp_client is not None:
                self._sftp_client.close()
            if "/b200-node." in self.workdir:
                self._exec(f"rm -rf -- {shlex.quote(self.workdir)}", timeout=self.connect_timeout + 20)
        except DriverError:
            pass  # the scratch directory lives in the node's temp dir, whose cleaner removes it
        finally:
            self._transport.close()
            self._transport = self._sftp_client = None

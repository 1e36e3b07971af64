"""The development driver: the "node" is this machine; commands run with subprocess."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile

from provisioning.drivers.base import (
    CommandResult,
    CommandTimeout,
    Driver,
    DriverError,
    check_argv,
    check_env,
    public_key_fingerprint,
)


class LocalDriver(Driver):
    def __init__(self, *, name: str = "local", host_key: str = "") -> None:
        self.description = f"{name} (local)"
        self.host_key = host_key
        self.workdir = tempfile.mkdtemp(prefix="b200-node-")
        self._closed = False

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        argv = check_argv(argv, timeout)
        environment = {**os.environ, **check_env(env)}
        try:
            # A session of its own, so that a timeout kills the command and everything it started.
            process = subprocess.Popen(  # noqa: S603 - argv, no shell
                argv,
                cwd=self.workdir,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as error:
            return CommandResult(exit_code=127, stdout="", stderr=f"{argv[0]}: {error.strerror or error}\n")
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            try:
                stdout, stderr = process.communicate(timeout=5)
            except subprocess.TimeoutExpired as late:  # a process that left the group still holds the pipes
                stdout, stderr = late.stdout or b"", late.stderr or b""
                assert process.stdout is not None and process.stderr is not None  # both opened as PIPE above
                process.stdout.close()
                process.stderr.close()
                process.wait()
            raise CommandTimeout(
                f"{argv[0]} ran past its {timeout:g} s timeout on {self.description} and was killed",
                stdout=stdout.decode(errors="replace"),
                stderr=stderr.decode(errors="replace"),
            ) from None
        return CommandResult(process.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace"))

    def put_file(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        path = self.resolve(remote_path)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, partial = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".part-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.chmod(partial, mode)
                os.replace(partial, path)
            except BaseException:
                if os.path.exists(partial):
                    os.unlink(partial)
                raise
        except OSError as error:
            raise DriverError(f"could not write {path} on {self.description}: {error.strerror or error}") from error

    def get_file(self, remote_path: str) -> bytes:
        path = self.resolve(remote_path)
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except OSError as error:
            raise DriverError(f"could not read {path} on {self.description}: {error.strerror or error}") from error

    def host_key_fingerprint(self) -> str:
        try:
            return public_key_fingerprint(self.host_key)
        except ValueError:
            return "local"

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            shutil.rmtree(self.workdir, ignore_errors=True)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)

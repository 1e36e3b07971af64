"""Private servers a fault test may stop and start (never the shared ones), and the processes in front of them.

Each class starts its process in `__init__` (or `start()`) and `stop()`s it; the fixtures in
tests/faults/conftest.py stop them in `finally`, so a failing test leaves nothing running.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.servers import ROOT, clean_environment, free_port, server_missing


def wait_until(condition, what: str, seconds: float, log: Path | None = None, describe=None):
    """Poll `condition` until it is truthy; raise with `what`, a log's tail and `describe()` when `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    tail = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
    raise AssertionError(f"{what} within {seconds} s\n{tail}\n{describe() if describe else ''}")


def stop_process(process: subprocess.Popen | None, seconds: float = 10) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


class PrivateRedis:
    """A redis-server of this test alone on a free loopback port, without persistence."""

    def __init__(self, folder: Path) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            server_missing("redis-server (the Redis server binary, for a private broker)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = folder / f"redis-{self.port}.log"
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        wait_until(self.answers, f"redis-server on port {self.port} did not answer", 10, self.log)

    def answers(self) -> bool:
        import redis

        client = redis.Redis(port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def freeze(self) -> None:
        """SIGSTOP: connections are still accepted by the kernel, but nothing answers (a hung broker host)."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.thaw()
        stop_process(self.process)


def postgres_bindir() -> Path | None:
    """The PostgreSQL server binaries: `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin."""
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        candidates.append(Path(out))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    return next((path for path in candidates if (path / "initdb").exists() and (path / "pg_ctl").exists()), None)


class PrivatePostgres:
    """A PostgreSQL cluster of this test alone (initdb in a temporary folder, a free loopback port).

    PostgreSQL refuses to run as root: as root, its binaries run as the `postgres` OS user, who owns the folder.
    """

    def __init__(self) -> None:
        self.bindir = postgres_bindir()
        if self.bindir is None:
            server_missing("the PostgreSQL server binaries (initdb, pg_ctl)")
        self.as_user: list[str] = []
        self.folder = Path(tempfile.mkdtemp(prefix="faults-pg-"))
        if os.geteuid() == 0:
            import pwd

            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                server_missing("an OS user `postgres` to run a private PostgreSQL as root")
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/shop"
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "shop")

    def _run(self, program: str, *args: str) -> None:
        command = [*self.as_user, str(self.bindir / program), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise AssertionError(f"{program} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "-t", "30", "start")

    def stop(self) -> None:
        """A fast shutdown: open transactions roll back, clients are disconnected."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(AssertionError):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


class Gunicorn:
    """The shop as production serves it: gunicorn with the base settings, on a free loopback port."""

    def __init__(self, folder: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"gunicorn-{self.port}.log"
        environment = clean_environment(DJANGO_SETTINGS_MODULE="config.settings.base", PYTHONUNBUFFERED="1")
        environment.update(env)
        command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{self.port}"]
        command += ["--workers", "1", "--timeout", "30", "--error-logfile", "-"]
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=output, stderr=subprocess.STDOUT)
        wait_until(self._answers, "gunicorn did not answer", 30, self.log)

    def _answers(self) -> bool:
        assert self.process.poll() is None, self.output()
        try:
            urllib.request.urlopen(self.url + "/static/css/site.css", timeout=2).close()
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)


class CeleryBeat:
    """`celery -A config beat`, the real scheduler, sending the project's periodic tasks to the broker."""

    def __init__(self, folder: Path, **env: str) -> None:
        self.log = folder / "beat.log"
        environment = clean_environment(DJANGO_SETTINGS_MODULE="config.settings.base", PYTHONUNBUFFERED="1")
        environment.update(env)
        command = [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO"]
        command += ["--schedule", str(folder / "beat-schedule"), "--pidfile", ""]
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=output, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)

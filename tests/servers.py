"""The real servers the suite uses. With CI=true a missing server fails the test; elsewhere it skips."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ANVIL = ROOT / "node_modules" / ".bin" / "anvil"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def server_missing(what: str) -> None:
    """Fail in CI, skip elsewhere: CI must never pass by skipping what it cannot reach."""
    if IN_CI:
        pytest.fail(f"{what} is required with CI=true", pytrace=False)
    pytest.skip(f"{what} is not available here")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rpc(url: str, method: str, params: list | None = None):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        answer = json.load(response)
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer["result"]


class Anvil:
    """A real anvil node on a free loopback port."""

    def __init__(self, *args: str) -> None:
        if not ANVIL.exists() and shutil.which("anvil") is None:
            server_missing("anvil (npm @foundry-rs/anvil; `make test` installs it)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        binary = str(ANVIL) if ANVIL.exists() else "anvil"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--silent", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                rpc(self.url, "eth_chainId")
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        server_missing(f"anvil at {self.url}")

    def call(self, method: str, params: list | None = None):
        return rpc(self.url, method, params)

    def mine(self, blocks: int = 1) -> None:
        self.call("anvil_mine", [hex(blocks)])

    def block_number(self) -> int:
        return int(self.call("eth_blockNumber"), 16)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


def clean_environment(**overrides: str) -> dict[str, str]:
    """The current environment without the project's settings variables, plus `overrides`."""
    prefixes = ("DJANGO_", "PAYMENTS_", "EMAIL_", "CHAIN_RPC_URLS_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env.update(overrides)
    return env


@functools.cache
def deployed_secrets() -> dict[str, str]:
    """Fresh keys for a shop process started with DEBUG off, where the development ones are refused: one set per
    test process, so that the web process, the worker and beat of a test share them (and the order links)."""
    from bip_utils import Bip39MnemonicGenerator, Bip39SeedGenerator, Bip39WordsNum, Bip44, Bip44Coins
    from django.core.management.utils import get_random_secret_key

    mnemonic = Bip39MnemonicGenerator().FromWordsNumber(Bip39WordsNum.WORDS_NUM_24).ToStr()
    account = Bip44.FromSeed(Bip39SeedGenerator(mnemonic).Generate(), Bip44Coins.ETHEREUM).Purpose().Coin().Account(0)
    return {
        "DJANGO_SECRET_KEY": get_random_secret_key(),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "PAYMENTS_XPUB": account.PublicKey().ToExtended(),
        "MANIFEST_SIGNING_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
    }


def database_url_for_tests() -> str:
    """A DATABASE_URL for the test database pytest-django created, for a process started by the test."""
    from urllib.parse import quote

    from django.db import connection

    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}{port}/{quote(db['NAME'], safe='')}"


def redis_answering(url: str) -> str:
    """`url` if a Redis server answers a PING there; fails under CI=true (skips elsewhere) when none does."""
    if not url.startswith(("redis://", "rediss://")):
        server_missing("Redis (set CELERY_BROKER_URL=redis://...)")
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        server_missing(f"Redis at {url} ({type(exc).__name__})")
    finally:
        client.close()
    return url


def wait_while_running(
    process: subprocess.Popen, condition, what: str, seconds: float, output, name: str, interval: float = 0.1
):
    """Poll `condition` until it is truthy; fail with `output()` if `process` exits first or the time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        assert process.poll() is None, f"the {name} exited ({process.returncode}):\n{output()}"
        time.sleep(interval)
    pytest.fail(f"{what} within {seconds} s; the {name}'s output:\n{output()}")


# The worker's default queue is its own queue too: tasks it enqueues itself (the scan that follows a notice,
# the emails) come back to it, never to a shared queue that another worker might consume.
WORKER_SCRIPT = """
import sys
from config.celery import app
app.conf.task_default_queue = sys.argv[1]
app.worker_main(["worker", "--pool", "solo", "--concurrency", "1", "-Q", sys.argv[1], "--hostname",
                 sys.argv[2] + "@%h", "--without-gossip", "--without-mingle", "--loglevel", "INFO"])
"""


class CeleryWorker:
    """A real `celery -A config worker` process (solo pool: the process is the one that runs the tasks).

    It reads the production-like base settings, writes to the test database and writes emails as files
    in `emails`.
    """

    def __init__(self, *, broker_url: str, queue: str, folder: Path, name: str = "worker", **env: str) -> None:
        self.queue = queue
        self.name = name
        self.log = folder / f"{name}.log"
        self.emails = folder / "emails"
        self.emails.mkdir(parents=True, exist_ok=True)
        environment = clean_environment(
            DJANGO_SETTINGS_MODULE="config.settings.base",
            DATABASE_URL=database_url_for_tests(),
            CELERY_BROKER_URL=broker_url,
            EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
            EMAIL_FILE_PATH=str(self.emails),
            PYTHONUNBUFFERED="1",
        )
        environment.update(env)
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-c", WORKER_SCRIPT, queue, f"{queue}-{name}"],
                cwd=ROOT,
                env=environment,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def email_subjects(self) -> list[str]:
        """The subject of each email sent, one per message: Django's file backend names a file by the second and
        the id of its connection, so two messages sent in the same second can share one file."""
        texts = (path.read_text(errors="replace") for path in self.emails.glob("*.log"))
        lines = (line for text in texts for line in text.splitlines())
        return [line.removeprefix("Subject: ") for line in lines if line.startswith("Subject: ")]

    def wait_for(self, condition, what: str, seconds: float = 30.0):
        """Poll `condition` until it is truthy; fail with the worker's output if it is not in time."""
        return wait_while_running(self.process, condition, what, seconds, lambda: self.output()[-6000:], self.name)

    def wait_ready(self, seconds: float = 30.0) -> CeleryWorker:
        self.wait_for(lambda: " ready." in self.output(), "the worker did not connect", seconds)
        return self

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@contextlib.contextmanager
def tasks_sent_to(queue: str) -> Iterator[None]:
    """This process's tasks travel through the broker to `queue` (eager mode off) while the block runs."""
    from config.celery import app

    previous_eager, previous_routes = app.conf.task_always_eager, app.conf.task_routes
    app.conf.task_always_eager = False
    app.conf.update(task_routes={name: {"queue": queue} for name in ("shop.*", "orders.*", "payments.*")})
    try:
        yield
    finally:
        app.conf.task_always_eager = previous_eager
        app.conf.update(task_routes=previous_routes)


def queue_delete(broker_url: str, queue: str) -> None:
    import redis

    client = redis.Redis.from_url(broker_url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        # A message a killed worker left unacknowledged: never given back later to a queue nobody reads.
        for tag, entry in client.hscan_iter("unacked"):
            if json.loads(entry)[2] == queue:
                client.zrem("unacked_index", tag)
                client.hdel("unacked", tag)
    except redis.RedisError:
        pass  # a private broker the test already stopped
    finally:
        client.close()


@contextlib.contextmanager
def celery_worker_on(broker_url: str, folder: Path, **env: str) -> Iterator[CeleryWorker]:
    """A worker on a queue of its own, fed by this process's tasks; stopped and its queue removed after."""
    queue = f"test-{uuid.uuid4().hex[:12]}"
    worker = CeleryWorker(broker_url=broker_url, queue=queue, folder=folder, **env)
    try:
        with tasks_sent_to(queue):
            yield worker
    finally:
        worker.stop()
        queue_delete(broker_url, queue)

"""Shared pieces of the provisioning fault tests: nodes behind real sshds, a fast preflight profile, the
operator's trigger, and what "nothing was handed over" means."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from orders.models import Order, OrderStatus, Preparation
from provisioning.access import account_name
from provisioning.models import AccessGrant, Manifest, Node, PreparationRun
from tests.servers import CeleryWorker, queue_delete, redis_answering, tasks_sent_to
from tests.sshd import SandboxSshd

PREPARE = "/api/v1/orders/{}/prepare/"
# The preparation these tests order, trimmed to the checks that prove a working two-rank stack in a few
# seconds on CPU (the whole rehearsal, with its compiled step, is what test_preparation_over_ssh runs).
FAST = "pytorch-blackwell"
FAST_PROFILE = {"name": "fault-tests", "checks": ["stack", "arch", "load", "forward", "backward", "allreduce"]}


@pytest.fixture
def fast_preparation(db) -> str:
    Preparation.objects.filter(slug=FAST).update(preflight_profile=FAST_PROFILE, setup_script="")
    return FAST


@pytest.fixture
def private_sshd(tmp_path, sandbox_sshd):
    """A node of this test's own, which the test may take down and bring back; the operator key is the suite's."""
    yield from own_node(tmp_path / "private-node", sandbox_sshd)


def own_node(root, sandbox_sshd, *, stock_keys: bool = False):
    """A sandboxed sshd of the test's own that the suite's operator key opens (a fixture's body)."""
    server = SandboxSshd.start(root, stock_keys=stock_keys)
    authorized = server.sandbox / "operator_keys" / "root"
    authorized.write_text(authorized.read_text() + sandbox_sshd.operator_public_key + "\n")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def node_on(db, sandbox_sshd, monkeypatch):
    """A GPU node row for a sandboxed sshd: CPU preflight with two ranks, accounts in its sandbox."""
    monkeypatch.setenv("NODE_SSH_KEY_FILE", str(sandbox_sshd.operator_key_file))

    def make(server: SandboxSshd, name: str, **fields) -> Node:
        defaults = {"python": sys.executable, "preflight_device": "cpu", "gpu_count": 2}
        node = server.node(name=name, **{**defaults, "accounts_root": str(server.sandbox), **fields})
        node.save()
        return node

    return make


@pytest.fixture
def workers(settings, tmp_path):
    """Real Celery workers on a queue of this test's own; this process's provisioning tasks go there (eager
    mode off). All stopped after."""
    from config.celery import app

    broker = redis_answering(settings.CELERY_BROKER_URL)
    queue = f"test-prep-{uuid.uuid4().hex[:12]}"
    started: list[CeleryWorker] = []

    def start(name: str, **env: str) -> CeleryWorker:
        started.append(CeleryWorker(broker_url=broker, queue=queue, folder=tmp_path, name=name, **env))
        return started[-1].wait_ready()

    try:
        with tasks_sent_to(queue):
            app.conf.update(task_routes={**app.conf.task_routes, "provisioning.*": {"queue": queue}})
            yield start
    finally:
        for worker in started:
            worker.stop()
        queue_delete(broker, queue)


def prepare(client, operator, order: Order, capture) -> float:
    """The operator presses Prepare (the API); the task runs in-process. Returns the seconds it took."""
    client.force_login(operator)
    started = time.monotonic()
    with capture(execute=True):
        response = client.post(PREPARE.format(order.reference))
    assert response.status_code == 202, response.content
    order.refresh_from_db()
    return time.monotonic() - started


def assert_nothing_handed_over(order: Order, *servers: SandboxSshd) -> None:
    """No grant, no manifest, and no account for the order in any node's user database."""
    assert not AccessGrant.objects.filter(order=order).exists()
    assert not Manifest.objects.filter(order=order).exists()
    for server in servers:
        assert server.entry("passwd", account_name(order)) is None, f"an account was created on {server.port}"
        assert not server.home(account_name(order)).exists()


def assert_failure_shown_to_operators(client, order: Order, words: str) -> None:
    """The order is preparation_failed, its last event and the /ops/ console say why."""
    assert order.status == OrderStatus.PREPARATION_FAILED
    event = order.events.last()
    assert (event.from_status, event.to_status, event.actor) == ("preparing", "preparation_failed", "system")
    assert words in event.reason, event.reason
    console = client.get("/ops/").content.decode()
    assert order.reference in console and words in console


def assert_handed_over_once(order: Order, node: Node, server: SandboxSshd) -> None:
    assert order.status == OrderStatus.ACTIVE
    grant = AccessGrant.objects.get(order=order)
    assert grant.node == node and grant.revoked_at is None
    assert Manifest.objects.filter(order=order).count() == 1
    assert server.entry("passwd", account_name(order)) is not None
    assert order.events.filter(to_status=OrderStatus.ACTIVE).count() == 1
    assert PreparationRun.objects.filter(order=order, status__in=["queued", "running"]).count() == 0


def node_processes(server: SandboxSshd, needle: str) -> list[int]:
    """Processes in the node's namespace whose command line contains `needle`."""
    found = []
    for pid in server.namespace_pids():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in command:
            found.append(pid)
    return found


def wait_until(condition, *, seconds: float, what: str, describe=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"{what} within {seconds:g} s" + (f": {describe()}" if describe else ""))


def describe_processes(pids: list[int]) -> str:
    """`pid cwd command` of each live process, for a failure message."""
    lines = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            lines.append(f"{pid} {os.readlink(f'/proc/{pid}/cwd')} {command[:200]}")
        except OSError:
            continue
    return "\n".join(lines) or "none"


class WhenPreflightRuns(threading.Thread):
    """Calls `action` once the preflight's processes run on the node (a watcher beside the preparation)."""

    def __init__(self, server: SandboxSshd, action, *, ranks: int = 1, seconds: float = 90) -> None:
        super().__init__(daemon=True)
        self.server, self.action, self.ranks, self.seconds = server, action, ranks, seconds
        self.seen: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            # The launcher (its command line names the preflight) and its spawned ranks.
            self.seen = wait_until(
                lambda: (
                    len(node_processes(self.server, "provisioning.preflight")) >= 1
                    and len(node_processes(self.server, "spawn_main")) >= self.ranks
                    and node_processes(self.server, "")
                ),
                seconds=self.seconds,
                what="the preflight did not start on the node",
            )
            self.action()
        except BaseException as exc:  # reported by the test
            self.error = exc

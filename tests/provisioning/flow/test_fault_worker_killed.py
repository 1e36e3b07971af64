"""A Celery worker killed (SIGKILL) in the middle of a preparation, its preflight running on a node behind
a real sshd. Redis gives the unacknowledged task back after the visibility timeout (acks_late), a second
worker runs it as the run's next attempt: it clears what the lost attempt left on the node, runs the
preflight again and hands over once: one grant, one account, one manifest, `active` once. A late copy of
the task changes nothing. What is lost: nothing (the first attempt's work is redone)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from core.jobs.kinds import JobKind
from orders.models import Order, OrderStatus
from provisioning.access import account_name
from provisioning.claims import LOCK_CLASS
from provisioning.models import AccessGrant, Manifest, PreparationRun, RunStatus
from provisioning.prepare import preparation_execute, preparation_start
from tests.provisioning.flow.node_faults import (
    PREPARE,
    describe_processes,
    node_processes,
    wait_until,
)
from tests.servers import database_url_for_tests

# Redis gives an unacknowledged task back this soon (the production default is an hour).
QUICK_REDELIVERY = {"CELERY_VISIBILITY_TIMEOUT_SECONDS": "3"}
worker_test = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def lock_holders(run_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s AND granted",
            [LOCK_CLASS, run_id],
        )
        return cursor.fetchone()[0]


def accounts_on(server, account: str) -> int:
    return sum(line.startswith(f"{account}:") for line in server.etc("passwd").read_text().splitlines())


def started_in(server, workdir: str) -> list[int]:
    """The node's processes working in `workdir` (what a preparation attempt started there)."""
    found = []
    for pid in server.namespace_pids():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if workdir and (cwd == workdir or cwd.startswith(workdir + "/")):
            found.append(pid)
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@worker_test
def test_a_worker_killed_mid_preparation_is_replaced_and_access_is_handed_over_exactly_once(
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    operator,
    client,
    workers,
):
    # Given a paid order on a node behind a real sshd, and a worker
    node_on(sandbox_sshd, "node-of-a-killed-worker")
    order = paid_order(preparation=fast_preparation)
    first = workers("first-worker", **QUICK_REDELIVERY)

    # When the operator triggers the preparation and the worker is killed while the preflight runs
    client.force_login(operator)
    assert client.post(PREPARE.format(order.reference)).status_code == 202
    run_ = wait_until(
        lambda: PreparationRun.objects.filter(order=order, step="running the GPU preflight").first(),
        seconds=45,
        what=f"the preflight did not start:\n{first.output()[-4000:]}",
    )
    wait_until(
        lambda: node_processes(sandbox_sshd, "spawn_main"),
        seconds=30,
        what="the preflight's ranks did not start on the node",
    )
    run_.refresh_from_db()
    lost_workdir = run_.node_workdir
    lost = started_in(sandbox_sshd, lost_workdir)  # the preflight, its ranks, the shell that started them
    first.process.kill()
    first.process.wait(timeout=10)
    killed_at = time.monotonic()
    (task_id,) = set(re.findall(r"provisioning\.preparation_run\[([0-9a-f-]+)\] received", first.output()))
    assert f"{task_id}] succeeded" not in first.output()

    # Then the run is left running by its first attempt, and nothing is handed over yet
    run_.refresh_from_db()
    assert (run_.status, run_.attempt) == (RunStatus.RUNNING, 1)
    assert lost_workdir and Path(lost_workdir).exists() and len(lost) >= 3, describe_processes(lost)
    assert not AccessGrant.objects.filter(order=order).exists()

    # When a new worker starts, after the visibility timeout
    second = workers("second-worker", **QUICK_REDELIVERY)

    # Then it gets the same task back, runs the preparation again as attempt 2, and the order is active
    second.wait_for(lambda: f"{JobKind.PREPARATION_RUN}[{task_id}] succeeded" in second.output(), "no redelivery", 60)
    redelivered_after = time.monotonic() - killed_at
    order = Order.objects.get(pk=order.pk)
    run_.refresh_from_db()
    assert (run_.status, run_.attempt) == (RunStatus.PASSED, 2), run_.error
    assert "attempt 2: the worker running attempt 1 was lost; starting over" in run_.log
    assert f"cleared the lost attempt's {lost_workdir} (exit 0)" in run_.log
    assert "attempt 2: the worker running attempt 1 was lost" in client.get(f"/ops/runs/{run_.pk}/").content.decode()

    # And it handed over exactly once: one grant, one account on the node, one manifest, active once
    assert order.status == OrderStatus.ACTIVE
    assert AccessGrant.objects.filter(order=order).count() == 1
    assert accounts_on(sandbox_sshd, account_name(order)) == 1
    assert Manifest.objects.filter(order=order).count() == 1
    assert order.events.filter(to_status=OrderStatus.ACTIVE).count() == 1
    assert PreparationRun.objects.filter(order=order).count() == 1

    # And nothing of the lost attempt is left on the node: its processes and its scratch directory are gone
    wait_until(
        lambda: not any(alive(pid) for pid in lost),
        seconds=10,
        what="the lost attempt's processes run",
        describe=lambda: describe_processes([pid for pid in lost if alive(pid)]),
    )
    assert not Path(lost_workdir).exists() and not started_in(sandbox_sshd, lost_workdir)

    # When a late copy of the task arrives, it changes nothing
    events = order.events.count()
    assert preparation_execute(run_id=run_.pk) is None
    assert AccessGrant.objects.filter(order=order).count() == 1 and order.events.count() == events
    run_.refresh_from_db()
    assert (run_.status, run_.attempt) == (RunStatus.PASSED, 2)
    print(f"\nkilled mid-preflight; redelivered and handed over {redelivered_after:.1f} s after the kill")


@pytest.mark.django_db
def test_a_second_delivery_leaves_a_run_alone_while_its_worker_lives_and_takes_it_over_once_it_died(
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    django_capture_on_commit_callbacks,
):
    # Given a run claimed by a live worker: its database session holds the run's advisory lock
    node_on(sandbox_sshd, "node-of-a-busy-worker")
    order = paid_order(preparation=fast_preparation)
    with django_capture_on_commit_callbacks(execute=False):  # the task is not run here
        (run_,) = preparation_start(order_id=order.pk, actor="olga")
    PreparationRun.objects.filter(pk=run_.pk).update(status=RunStatus.RUNNING, attempt=1, started_at=timezone.now())
    live_worker = psycopg.connect(database_url_for_tests(), autocommit=True)
    live_worker.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, run_.pk])

    # When the task is delivered a second time (a visibility timeout shorter than the run, say)
    # Then it leaves the run to the live worker
    assert preparation_execute(run_id=run_.pk) is None
    run_.refresh_from_db()
    assert (run_.status, run_.attempt) == (RunStatus.RUNNING, 1)

    # When that worker dies (its session ends) and the task is delivered again
    live_worker.close()
    wait_until(lambda: not lock_holders(run_.pk), seconds=10, what="the server kept the dead session's lock")
    with django_capture_on_commit_callbacks(execute=True):
        outcome = preparation_execute(run_id=run_.pk)

    # Then the run starts over as attempt 2 and hands over once
    run_.refresh_from_db()
    assert (outcome, run_.status, run_.attempt) == (RunStatus.PASSED, RunStatus.PASSED, 2), run_.error
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE and AccessGrant.objects.filter(order=order).count() == 1

"""A database error in the middle of a preparation (a failover, a dropped connection) loses nothing: the step
is retried with backoff until it succeeds, a run whose task was lost is picked up again by beat, and the
operator's button always restarts a stuck preparation. The node is never set aside for the database's fault.

The error is injected by making one project function raise django.db.OperationalError once; the task runs
through Celery's real task code (eager here: the retry runs in-process)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from core.jobs.models import Job
from core.jobs.tasks import jobs_send_due_task
from orders.models import Order, OrderStatus
from provisioning import node_steps
from provisioning import prepare as prepare_module
from provisioning.models import AccessGrant, NodeState, PreparationRun, RunStatus
from provisioning.prepare import PREPARATION_RUN, preparation_start
from provisioning.tasks import preparation_resume_stuck_task
from tests.provisioning.flow.node_faults import PREPARE, prepare, wait_until
from tests.stored_rows import jobs_lost

STEPS = {
    "claiming-the-run": (prepare_module, "run_claim"),  # before anything ran: the run stays queued
    "mid-run": (node_steps, "progress_write"),  # the node is busy with the preparation
    "recording-the-outcome": (prepare_module, "preparation_conclude"),  # the run passed, the order not yet moved
}


@pytest.fixture
def retries_run_in_process():
    """Celery's eager mode runs a task's retry at once, in-process, when errors are not propagated to the
    caller (the suite propagates them by default): what a worker does with the retry it sends itself."""
    from config.celery import app

    previous, app.conf.task_eager_propagates = app.conf.task_eager_propagates, False
    yield
    app.conf.task_eager_propagates = previous


def fails_once(monkeypatch, step: tuple) -> list[tuple]:
    module, name = step
    original, raised = getattr(module, name), []

    def flaky(*args, **kwargs):
        if not raised:
            raised.append(step)
            raise OperationalError("server closed the connection unexpectedly")
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    return raised


def assert_handed_over_on(order, node) -> None:
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE, [e.reason for e in order.events.all()]
    assert order.events.filter(to_status=OrderStatus.ACTIVE).count() == 1
    assert AccessGrant.objects.filter(order=order, revoked_at__isnull=True).count() == 1
    node.refresh_from_db()
    assert node.state == NodeState.IN_USE, node.state_reason
    run_ = PreparationRun.objects.get(order=order)
    assert (run_.status, run_.error) == (RunStatus.PASSED, "")


@pytest.mark.django_db
@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_a_database_error_in_a_preparation_step_is_retried_until_it_succeeds(
    local_node, fast_preparation, paid_order, operator, client, monkeypatch, step, retries_run_in_process,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given a paid order on a sound node, and a database that fails once during the preparation
    node = local_node()
    order = paid_order(preparation=fast_preparation)
    raised = fails_once(monkeypatch, step)

    # When the operator prepares it
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the error happened, the step was retried, and access was handed over once; the node is in use
    assert raised == [step]
    assert_handed_over_on(order, node)


def stuck(order, capture, *, status: str) -> PreparationRun:
    """The order is preparing ten minutes ago, its run's task lost: never sent (the broker was down), or taken by
    a worker that died after claiming the run; its job is then still held, until the job's lease ends."""
    with capture(execute=False):
        (run_,) = preparation_start(order_id=order.pk, actor="olga")
    long_ago = timezone.now() - dt.timedelta(minutes=10)
    fields = {"created_at": long_ago}
    jobs_lost(kind=PREPARATION_RUN)
    if status == RunStatus.RUNNING:  # its worker died after claiming it; nobody holds its lock
        fields.update(status=RunStatus.RUNNING, attempt=1, started_at=long_ago, step="running the GPU preflight")
        Job.objects.filter(kind=PREPARATION_RUN).update(claimed_until=timezone.now() + dt.timedelta(minutes=10))
    PreparationRun.objects.filter(pk=run_.pk).update(**fields)
    order.refresh_from_db()
    assert order.status == OrderStatus.PREPARING
    return run_


@pytest.mark.django_db
def test_the_operators_button_restarts_a_preparation_whose_task_was_lost(
    local_node, fast_preparation, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given a preparation whose run sits queued forever, and the console that shows it
    node = local_node()
    order = paid_order(preparation=fast_preparation)
    stuck(order, django_capture_on_commit_callbacks, status=RunStatus.QUEUED)
    client.force_login(operator)
    console = client.get("/ops/").content.decode()
    assert f'action="/ops/orders/{order.reference}/prepare/"' in console

    # When the operator presses its button
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/ops/orders/{order.reference}/prepare/")

    # Then the run starts again and hands over
    assert response.status_code == 302
    assert_handed_over_on(order, node)


@pytest.mark.django_db
@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.RUNNING])
def test_beat_picks_up_a_stuck_preparation_by_itself(
    local_node, fast_preparation, paid_order, status, django_capture_on_commit_callbacks
):
    # Given a preparation stuck for ten minutes: its run queued (the task lost) or running with no worker
    node = local_node()
    order = paid_order(preparation=fast_preparation)
    stuck(order, django_capture_on_commit_callbacks, status=status)

    # When beat's periodic passes run: the job sweep (a job never sent) and the preparation's own (a run whose
    # worker died while its job is still held)
    with django_capture_on_commit_callbacks(execute=True):
        resent = jobs_send_due_task()
        resumed = preparation_resume_stuck_task()

    # Then the run starts again (the next attempt) by one of them, and hands over
    assert (resent, resumed) == ((1, 0) if status == RunStatus.QUEUED else (0, 1))
    assert_handed_over_on(order, node)


def terminate_other_sessions() -> int:
    """PostgreSQL ends every session on the test database but this one (the worker's): what a failover or
    a restarted pooler does to a connection in use."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_real_worker_whose_database_connection_is_cut_mid_preflight_retries_and_hands_over(
    sandbox_sshd, node_on, fast_preparation, paid_order, operator, client, workers
):
    # Given a paid order on a node behind a real sshd, and a real worker
    node = node_on(sandbox_sshd, "node-of-a-cut-connection")
    order = paid_order(preparation=fast_preparation)
    worker = workers("worker")

    # When the operator triggers the preparation and the database cuts the worker's connection mid-preflight
    client.force_login(operator)
    assert client.post(PREPARE.format(order.reference)).status_code == 202
    wait_until(
        lambda: PreparationRun.objects.filter(order=order, step="running the GPU preflight").exists(),
        seconds=60,
        what=f"the preflight did not start:\n{worker.output()[-4000:]}",
    )
    assert terminate_other_sessions() >= 1

    # Then the task retried (a database error, never the node's fault) and the order is active, once
    worker.wait_for(lambda: "Retry in" in worker.output(), "the task did not retry", 60)
    wait_until(
        lambda: Order.objects.get(pk=order.pk).status == OrderStatus.ACTIVE,
        seconds=90,
        what="the order did not become active",
        describe=lambda: worker.output()[-6000:],
    )
    assert_handed_over_on(Order.objects.get(pk=order.pk), node)
    assert PreparationRun.objects.get(order=order).attempt == 2

"""Job kinds are registered names (core/jobs/kinds.py): every kind has exactly one task, every job task runs a
kind, and a stored job that names no task is set aside with a reason instead of stopping the others."""

from __future__ import annotations

import importlib

import pytest
from django.utils import timezone

from config.celery import app
from core.jobs.kinds import JOB_TASKS, JobKind, job_task_for
from core.jobs.models import Job
from core.jobs.outbox import jobs_send_due

TASK_MODULES = ["core.jobs.tasks", "orders.tasks", "shop.tasks", "payments.tasks", "provisioning.tasks"]


def test_every_kind_has_one_task_registered_under_its_name():
    for module in TASK_MODULES:
        importlib.import_module(module)
    assert set(JOB_TASKS) == set(JobKind)
    for kind in JobKind:
        assert app.tasks[str(kind)].job_source == JOB_TASKS[kind].job_source
        assert JOB_TASKS[kind].name == str(kind)


def test_a_kind_is_found_without_importing_its_task_module_first():
    # A web process never imports the task modules: the lookup imports them through Celery's autodiscovery.
    assert job_task_for(JobKind.ORDER_LOOKUP).name == "shop.order_lookup"


def test_a_second_task_for_a_kind_is_refused():
    from core.jobs.task import job_task

    def another_email_send(email_id: int) -> bool:
        return False

    with pytest.raises(ValueError, match="orders.email_send runs orders.tasks.email_send_task already"):
        job_task(kind=JobKind.EMAIL_SEND)(another_email_send)


@pytest.mark.django_db
def test_a_stored_job_naming_no_task_is_set_aside_and_the_rest_are_sent(django_capture_on_commit_callbacks):
    now = timezone.now()
    stray = Job.objects.create(kind="shop.tasks.email_send_task", args={}, due_at=now)  # a name of old, unmigrated
    assert jobs_send_due(now=now) == 0
    stray.refresh_from_db()
    assert stray.gave_up_at == now
    assert "no job task 'shop.tasks.email_send_task'" in stray.last_error

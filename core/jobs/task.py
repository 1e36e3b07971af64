"""`job_task`: the decorator that makes a Celery task run stored jobs (core/jobs/outbox.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from celery import Task, current_task, shared_task

from core.jobs.kinds import JOB_TASKS, JobKind
from core.jobs.outbox import job_run

DEFAULT_LEASE_SECONDS = 300
_R = TypeVar("_R")


def job_task(
    *, kind: JobKind, lease_seconds: int = DEFAULT_LEASE_SECONDS, max_attempts: int | None = 10, **celery_options: Any
) -> Callable[[Callable[..., _R]], Task[..., _R | None]]:
    """The Celery task that runs jobs of `kind` (core/jobs/kinds.py), registered under the kind's name.

    Sent for a job (with `job_id`), it claims the job for `lease_seconds` (longer than one run: a dead worker's
    claim lapses after it), runs, and marks it done. Called without one (beat's fan-out, a shell), it just runs.
    """

    def register(function: Callable[..., _R]) -> Task[..., _R | None]:
        # The task's own arguments pass through as they come: `function` has them, Celery checks none.
        def run(*args: Any, job_id: int | None = None, **kwargs: Any) -> _R | None:
            if job_id is None:
                return function(*args, **kwargs)
            work = lambda: function(*args, **kwargs)  # noqa: E731
            delivery = current_task.request.id or ""
            return job_run(job_id, work, delivery=delivery, lease_seconds=lease_seconds, max_attempts=max_attempts)

        run.__name__, run.__qualname__ = function.__name__, function.__qualname__
        run.__module__, run.__doc__ = function.__module__, function.__doc__
        source = f"{function.__module__}.{function.__qualname__}"
        if getattr(JOB_TASKS.get(kind), "job_source", source) != source:  # two apps claiming one kind
            raise ValueError(f"job kind {kind} runs {JOB_TASKS[kind].job_source} already, not {source}")
        # Celery makes each extra option (job_lease_seconds, job_source) an attribute of the task.
        decorator: Callable[[Callable[..., _R | None]], Task[..., _R | None]] = shared_task(
            name=str(kind), job_lease_seconds=lease_seconds, job_source=source, **celery_options
        )
        task = decorator(run)
        JOB_TASKS[kind] = task
        return task

    return register

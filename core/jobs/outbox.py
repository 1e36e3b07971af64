"""The job outbox: background work stored with the change that needs it, and run at least once.

A service calls `job_enqueue(kind, **args)` inside its own transaction, so the job commits with the change
or not at all; services never import a Celery task. Once the transaction commits the job is sent to the
broker. If the broker is down at that moment, or the worker that took it dies, beat's `jobs_send_due` sends
it again once it is due. A worker claims the row before running it (compare-and-swap), so two deliveries
never run it at the same time; a job can still run twice (a crash after the work, before it is marked
done), so every task it names stays idempotent.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from core.jobs.kinds import JobKind, job_task_for
from core.jobs.models import Job

log = logging.getLogger(__name__)
_R = TypeVar("_R")


def job_enqueue(kind: JobKind, **args: Any) -> Job:
    """Store a job of `kind` (core/jobs/kinds.py), sent to its task once the caller's transaction commits."""
    job = Job.objects.create(
        kind=kind, args=args, due_at=timezone.now() + dt.timedelta(seconds=settings.JOB_RESEND_AFTER_SECONDS)
    )
    # robust: with the broker down the error is logged and the row stays due; beat sends it.
    transaction.on_commit(lambda: job_send(job), robust=True)
    return job


def job_send(job: Job) -> None:
    # Resolved by kind when sent: the task module imports the services, never the other way round.
    job_task_for(job.kind).apply_async(kwargs={**job.args, "job_id": job.pk})


def jobs_due(now: dt.datetime) -> QuerySet[Job]:
    """Open jobs nobody holds whose time has come: never sent, lost on the way, or failed and waiting."""
    return (
        Job.objects.open()
        .filter(gave_up_at__isnull=True, due_at__lte=now)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
    )


def jobs_send_due(*, now: dt.datetime, limit: int = 500) -> int:
    """Beat: send what is due again (shop/retention.py forgets what finished). A broker error stops the pass
    (raised): what is left stays due for the next one."""
    sent = 0
    for job in jobs_due(now)[:limit]:
        try:
            lease = dt.timedelta(seconds=job_task_for(job.kind).job_lease_seconds)
        except KeyError as exc:  # a task renamed or removed: one job must not stop the rest
            Job.objects.filter(pk=job.pk).update(gave_up_at=now, last_error=f"no job task {job.kind!r}: {exc}"[:300])
            log.error("job %s names no job task: %s", job.pk, job.kind)
            continue
        job_send(job)
        # Not sent again while this send may still wait in the queue.
        Job.objects.filter(pk=job.pk).update(due_at=now + lease)
        sent += 1
    return sent


def job_run(
    job_id: int, work: Callable[[], _R], *, delivery: str, lease_seconds: int, max_attempts: int | None
) -> _R | None:
    """Claim the job for this `delivery` (the Celery message id) and do its work; None when it is done already
    or another delivery holds it. The broker gives a message back only when its worker died (late acks), so
    the same delivery takes over its own claim at once. An error is written on the row (beat retries it
    later, or gives up after `max_attempts`) and raised (Celery retries)."""
    now = timezone.now()
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    if delivery:
        free |= Q(claimed_by=delivery)
    claimed = (
        Job.objects.open()
        .filter(free, pk=job_id, gave_up_at__isnull=True)
        .update(
            claimed_until=now + dt.timedelta(seconds=lease_seconds), claimed_by=delivery, attempts=F("attempts") + 1
        )
    )
    if claimed != 1:
        return None
    try:
        result = work()
    except BaseException as exc:  # a soft time limit too: the job is released for the next try
        _job_failed(job_id, exc, max_attempts=max_attempts)
        raise
    Job.objects.filter(pk=job_id).update(done_at=timezone.now(), claimed_until=None, claimed_by="", last_error="")
    return result


def _job_failed(job_id: int, exc: BaseException, *, max_attempts: int | None) -> None:
    now = timezone.now()
    attempts = Job.objects.filter(pk=job_id).values_list("attempts", flat=True).first() or 0
    backoff = dt.timedelta(seconds=min(3600, 30 * 2 ** min(attempts, 7)))
    fields = {"claimed_until": None, "claimed_by": "", "last_error": repr(exc)[:300], "due_at": now + backoff}
    if max_attempts is not None and attempts >= max_attempts:
        fields["gave_up_at"] = now
        log.error("job %s gave up after %s attempts: %r", job_id, attempts, exc)
    Job.objects.filter(pk=job_id).update(**fields)

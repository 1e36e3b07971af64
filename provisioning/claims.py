"""Who executes a preparation run: one claim per attempt, so that a task delivered twice never runs twice
at once, and a run left `running` by a worker that died starts over instead of waiting forever.

Celery delivers a task again when its worker died before acknowledging it (acks_late, reject on worker
lost, Redis' visibility timeout). The delivered task then finds its run:
- `queued`: it claims it (attempt 1);
- `passed`, `failed` or `error`: finished, it returns quietly;
- `running`: either a live worker is on it (a second delivery while the first still runs: leave it), or
  the worker died (start over as the next attempt). The executing attempt holds a session advisory lock
  keyed by the run, which PostgreSQL drops with the dead worker's connection, so the lock tells the two
  apart at once.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from provisioning.models import PreparationRun, RunStatus
from provisioning.states import run_transition

# The advisory-lock namespace of preparation runs ("b200"); the run's id is the second key.
LOCK_CLASS = 0x62323030


@dataclass(frozen=True)
class Claim:
    run_id: int
    attempt: int
    lost_workdir: str  # the scratch directory a lost attempt left on the node, to clear before starting over


def run_claim(*, run_id: int) -> Claim | None:
    """Claim the run for this worker, or None when it is finished or a live worker holds it."""
    if not _try_lock(run_id):
        return None  # a live attempt holds the run
    now = timezone.now()
    claim = None
    with transaction.atomic():
        run = PreparationRun.objects.select_for_update().filter(pk=run_id).first()
        if run is not None and _claimable(run):
            attempt = run.attempt + 1
            log = run.log
            if run.status == RunStatus.RUNNING:
                log += f"attempt {attempt}: the worker running attempt {run.attempt} was lost; starting over\n"
            lost = run.node_workdir if run.status == RunStatus.RUNNING else ""
            PreparationRun.objects.filter(pk=run_id).update(
                attempt=attempt,
                started_at=now,
                step="connecting",
                progress=0,
                log=log[-20_000:],
                node_workdir="",
            )
            # A lost worker's run stays `running` (no event): its log says the next attempt took over.
            run_transition(run=run, to=RunStatus.RUNNING, actor="system", reason=f"attempt {attempt}", now=now)
            claim = Claim(run_id=run_id, attempt=attempt, lost_workdir=lost)
    if claim is None:
        _unlock(run_id)
    return claim


def run_orphaned(run: PreparationRun) -> bool:
    """A `running` run that no live worker holds: its task failed for good or was lost with its worker."""
    if not _try_lock(run.pk):
        return False  # a live attempt holds it
    _unlock(run.pk)
    return True


def run_release(claim: Claim) -> None:
    # A connection that broke took the lock with it.
    with contextlib.suppress(DatabaseError):
        _unlock(claim.run_id)


def _claimable(run: PreparationRun) -> bool:
    """Under the run's lock: queued, or running yet nobody held its lock (the worker that ran it is gone);
    a finished run is left alone (a late delivery changes nothing)."""
    return run.status in (RunStatus.QUEUED, RunStatus.RUNNING)


def _try_lock(run_id: int) -> bool:
    """Whether the advisory lock was taken (False: a live attempt holds it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_CLASS, run_id])
        return bool(cursor.fetchone()[0])


def _unlock(run_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, run_id])

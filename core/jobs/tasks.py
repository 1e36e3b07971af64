"""Beat's one recovery sweep: jobs whose send was lost, whose worker died, or whose retry is due."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from core.jobs.outbox import jobs_send_due


@shared_task(acks_late=True)
def jobs_send_due_task() -> int:
    return jobs_send_due(now=timezone.now())

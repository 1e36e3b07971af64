"""A background job, stored in the transaction of the change that needs it (core/jobs/outbox.py)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import pgettext_lazy


class JobQuerySet(models.QuerySet["Job"]):
    def open(self) -> JobQuerySet:
        return self.filter(done_at__isnull=True)

    def given_up(self) -> JobQuerySet:
        return self.open().filter(gave_up_at__isnull=False)


class Job(models.Model):
    """One call of a registered task (`kind`, its Celery name) with its keyword arguments.

    No status column: a job is open until `done_at`; `claimed_until` says a worker holds it; `due_at` says when
    beat sends it (again) if nothing has run it by then.
    """

    kind = models.CharField(max_length=120, help_text="the Celery task that runs it")
    args = models.JSONField(default=dict, blank=True, help_text="its keyword arguments")
    created_at = models.DateTimeField(default=timezone.now)
    due_at = models.DateTimeField(help_text="beat sends it again from then on, unless it is done or held")
    claimed_until = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=64, blank=True, help_text="the Celery message that holds it")
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True, help_text="its attempts ran out: for an operator")
    done_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        verbose_name = pgettext_lazy("staff", "job")
        verbose_name_plural = pgettext_lazy("staff", "jobs")
        ordering = ["due_at", "pk"]
        indexes = [models.Index(fields=["done_at", "due_at"], name="job_due")]

    def __str__(self) -> str:
        return f"{self.kind}({self.args})"

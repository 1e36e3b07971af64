"""Jobs, read-only: what is waiting, what failed and why, what gave up (an operator acts on the cause)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from core.jobs.models import Job, JobQuerySet

# ModelAdmin is generic in the stubs only (subscripting it when the code runs fails).
if TYPE_CHECKING:
    _JobAdminBase = admin.ModelAdmin[Job]
else:
    _JobAdminBase = admin.ModelAdmin


class OpenFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Job]) -> list[tuple[str, str]]:
        return [("open", "open"), ("given_up", "given up"), ("done", "done")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        jobs = cast(JobQuerySet, queryset)  # the change list's rows come from Job.objects, a JobQuerySet
        if self.value() == "open":
            return jobs.open().filter(gave_up_at__isnull=True)
        if self.value() == "given_up":
            return jobs.given_up()
        if self.value() == "done":
            return queryset.filter(done_at__isnull=False)
        return queryset


@admin.register(Job)
class JobAdmin(_JobAdminBase):
    list_display = ("pk", "kind", "args", "attempts", "due_at", "claimed_until", "gave_up_at", "done_at", "last_error")
    list_filter = (OpenFilter, "kind")
    search_fields = ("kind", "last_error")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

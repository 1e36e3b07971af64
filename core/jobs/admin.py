"""Jobs, read-only: what is waiting, what failed and why, what gave up (an operator acts on the cause)."""

from __future__ import annotations

from django.contrib import admin

from core.jobs.models import Job


class OpenFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("open", "open"), ("given_up", "given up"), ("done", "done")]

    def queryset(self, request, queryset):
        if self.value() == "open":
            return queryset.open().filter(gave_up_at__isnull=True)
        if self.value() == "given_up":
            return queryset.given_up()
        if self.value() == "done":
            return queryset.filter(done_at__isnull=False)
        return queryset


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("pk", "kind", "args", "attempts", "due_at", "claimed_until", "gave_up_at", "done_at", "last_error")
    list_filter = (OpenFilter, "kind")
    search_fields = ("kind", "last_error")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from provisioning.models import AccessGrant, Manifest, Node, PreparationRun


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "driver", "host", "port", "gpu_model", "gpu_count", "state", "state_reason"]
    list_filter = ["driver", "state"]
    search_fields = ["name", "host"]


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(PreparationRun)
class PreparationRunAdmin(ReadOnlyAdmin):
    list_display = ["order", "node", "status", "step", "progress", "created_at", "finished_at"]
    list_filter = ["status"]
    list_select_related = ["order", "node"]


@admin.register(AccessGrant)
class AccessGrantAdmin(ReadOnlyAdmin):
    list_display = ["order", "node", "account", "host", "port", "ends_at", "revoked_at"]
    list_select_related = ["order", "node"]


@admin.register(Manifest)
class ManifestAdmin(ReadOnlyAdmin):
    list_display = ["order", "created_at"]

from __future__ import annotations

from django.contrib import admin

from config.admin_base import ReadOnlyAdmin
from provisioning.models import AccessGrant, Manifest, Node, PreparationRun


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "driver", "host", "port", "gpu_model", "gpu_count", "state", "state_reason"]
    list_filter = ["driver", "state"]
    search_fields = ["name", "host"]


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

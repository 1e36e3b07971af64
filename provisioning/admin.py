from __future__ import annotations

from django.contrib import admin

from provisioning.models import Node


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "driver", "host", "port", "gpu_model", "gpu_count", "state"]
    list_filter = ["driver", "state"]
    search_fields = ["name", "host"]

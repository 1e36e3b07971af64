from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "core.jobs"
    label = "jobs"
    verbose_name = "Background jobs"

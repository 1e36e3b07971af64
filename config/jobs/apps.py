from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "config.jobs"
    label = "jobs"
    verbose_name = "Background jobs"

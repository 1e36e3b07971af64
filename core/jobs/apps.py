from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import pgettext_lazy


class JobsConfig(AppConfig):
    name = "core.jobs"
    label = "jobs"
    verbose_name = pgettext_lazy("staff", "Background jobs")

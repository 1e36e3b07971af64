from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import pgettext_lazy


class TalliesConfig(AppConfig):
    name = "core.tallies"
    label = "tallies"
    verbose_name = pgettext_lazy("staff", "Row tallies")

from __future__ import annotations

from django.apps import AppConfig


class TalliesConfig(AppConfig):
    name = "core.tallies"
    label = "tallies"
    verbose_name = "Row tallies"

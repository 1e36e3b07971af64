from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import pgettext_lazy


class FleetConfig(AppConfig):
    """The GPU nodes the shop sells, their states and events."""

    name = "fleet"
    verbose_name = pgettext_lazy("staff", "Fleet")

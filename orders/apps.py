from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import pgettext_lazy


class OrdersConfig(AppConfig):
    """The order domain. Its label stays "shop", the app it was part of: its tables, migrations and permissions
    keep their names, so no data moves."""

    name = "orders"
    label = "shop"
    verbose_name = pgettext_lazy("staff", "Orders")

    def ready(self) -> None:
        # the capacity cache's signals; the outbox's
        from orders import capacity_shown, outbox  # noqa: F401

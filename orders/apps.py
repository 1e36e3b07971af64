from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import pgettext_lazy


class OrdersConfig(AppConfig):
    """The order domain. Its tables keep the names they had under its first label, "shop" (each model's
    `db_table`), so no data moved when the label became the package's name (core/app_labels.py)."""

    name = "orders"
    label = "orders"
    verbose_name = pgettext_lazy("staff", "Orders")

    def ready(self) -> None:
        # the capacity cache's signals; the outbox's
        from orders import capacity_shown, link_rotation, outbox  # noqa: F401

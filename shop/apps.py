from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "shop"
    verbose_name = "Shop"

    def ready(self) -> None:
        # the caches' signals; the shop's emails
        from shop import capacity_shown, catalog, order_lookup, outbox  # noqa: F401

from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "shop"
    verbose_name = "Shop"

    def ready(self) -> None:
        from shop import capacity_shown, catalog, outbox  # noqa: F401  the caches' signals; the shop's emails

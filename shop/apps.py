from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    """The storefront: pages, API, forms and staff screens over the order domain (orders/)."""

    name = "shop"
    label = "storefront"
    verbose_name = "Shop"

    def ready(self) -> None:
        # the catalog's cache signals; "Find my order"'s
        from shop import catalog, order_lookup  # noqa: F401

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import pgettext_lazy


class ShopConfig(AppConfig):
    """The storefront: pages, API, forms and staff screens over the order domain (orders/)."""

    name = "shop"
    label = "shop"
    verbose_name = pgettext_lazy("staff", "Shop")

    def ready(self) -> None:
        # the catalog's cache signals; "Find my order"'s
        from shop import catalog, order_lookup  # noqa: F401

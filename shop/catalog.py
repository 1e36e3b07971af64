"""Reads of the catalog, shared by the pages and the API.

Durations, preparations, the lot, the networks and their assets change rarely (staff, the price feed, the
scan's health row), yet every page and every order read them: they are kept in the default cache for
CATALOG_CACHE_SECONDS (5 s), dropped at once when one of their rows is saved or deleted, or a network's health
flips, in this process (in every process when CACHE_URL names a shared cache). The short lifetime is the
backstop for what no signal reaches: another worker's locmem cache, a queryset update(), a rate growing old.
The count of free lots shown with it is cached for a shorter time (orders/capacity_shown.py).
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass

from django.core.cache import cache
from django.db.models.signals import post_delete, post_save

from orders.capacity_shown import AVAILABLE_KEY, lots_available_shown
from orders.models import Duration, LotSpec, Preparation
from payments.models import Asset, Network, Rate
from payments.networks import network_health_changed, networks_offered

CATALOG_KEY = "shop:catalog:v1"
# The rows the cached catalog is made of: saving or deleting one drops it.
CATALOG_MODELS = (LotSpec, Duration, Preparation, Network, Asset, Rate)
CATALOG_CACHE_SECONDS = 5  # a network the scan finds down is hidden at most this much later than before


@dataclass(frozen=True)
class CatalogData:
    lot: LotSpec
    durations: list[Duration]
    preparations: list[Preparation]
    networks: list[Network]  # each with `offered_assets`
    version: str  # changes with the data: the key of the pages' cached fragments


@dataclass(frozen=True)
class Catalog:
    lot: LotSpec
    durations: list[Duration]
    preparations: list[Preparation]
    networks: list[Network]  # each with `offered_assets`
    lots_available: int
    version: str


def catalog_data() -> CatalogData:
    """The cached catalog rows; each call returns its own copies (the cache pickles), safe to modify."""
    data: CatalogData | None = cache.get(CATALOG_KEY)
    if data is None:
        rows = (
            LotSpec.current(),
            list(Duration.objects.filter(active=True)),
            list(Preparation.objects.filter(active=True)),
            networks_offered(),
        )
        # A digest of the rows: the pages' fragments outlive a reload that finds the same catalog.
        version = hashlib.sha256(pickle.dumps(rows)).hexdigest()[:16]
        data = CatalogData(*rows, version=version)
        cache.set(CATALOG_KEY, data, CATALOG_CACHE_SECONDS)
    return data


def catalog_current() -> Catalog:
    data = catalog_data()
    return Catalog(
        lot=data.lot,
        durations=data.durations,
        preparations=data.preparations,
        networks=data.networks,
        lots_available=lots_available_shown(),
        version=data.version,
    )


def catalog_forget(**_kwargs: object) -> None:
    """Drop the cached catalog and the shown count: the next read goes to the database."""
    cache.delete_many([CATALOG_KEY, AVAILABLE_KEY])


network_health_changed.connect(catalog_forget, dispatch_uid="catalog_forget_network_health")
for _model in CATALOG_MODELS:
    post_save.connect(catalog_forget, sender=_model, dispatch_uid=f"catalog_forget_save_{_model.__name__}")
    post_delete.connect(catalog_forget, sender=_model, dispatch_uid=f"catalog_forget_delete_{_model.__name__}")

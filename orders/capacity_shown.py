"""The count of free lots a page shows, cached for display only: placing an order counts again under the row
locks (orders/capacity.py). A node saved or deleted, an order placed or a lot freed here updates it at once."""

from __future__ import annotations

import contextlib

from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from fleet.models import Node
from orders.capacity import lots_available

AVAILABLE_KEY = "shop:lots-available:v1"
LOTS_AVAILABLE_CACHE_SECONDS = 2


def lots_available_shown() -> int:
    """The number of free lots a page shows: at most LOTS_AVAILABLE_CACHE_SECONDS old."""
    available: int | None = cache.get(AVAILABLE_KEY)
    if available is None:
        available = lots_available(timezone.now())
        cache.set(AVAILABLE_KEY, available, LOTS_AVAILABLE_CACHE_SECONDS)
    return available


def lots_available_recount() -> int:
    """Counted now (before a refusal); the pages show this count from here on."""
    available = lots_available(timezone.now())
    cache.set(AVAILABLE_KEY, available, LOTS_AVAILABLE_CACHE_SECONDS)
    return available


def lots_available_taken(lots: int) -> None:
    """An order placed here took `lots`: the shown count follows at once, without counting again."""
    with contextlib.suppress(ValueError):  # not cached: the next read counts
        cache.decr(AVAILABLE_KEY, lots)


def lots_available_forget(**_kwargs: object) -> None:
    """A node added, changed or removed here: the next page counts again."""
    cache.delete(AVAILABLE_KEY)


post_save.connect(lots_available_forget, sender=Node, dispatch_uid="lots_available_forget_node_save")
post_delete.connect(lots_available_forget, sender=Node, dispatch_uid="lots_available_forget_node_delete")

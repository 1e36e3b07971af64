"""How long the steps after the payment usually take, measured on the shop's own recent orders (issue 40): the paid
page says how soon an operator usually starts the preparation (not "your node is being prepared" while nobody has
pressed Prepare), the preparing page about how long is left beside the percentage. Medians over the last
WINDOW, none below MIN_SAMPLES (a guess would be a promise); kept in the cache for a few minutes."""

from __future__ import annotations

import datetime as dt
import statistics

from django.core.cache import cache

from orders.models import OrderEvent, OrderStatus
from provisioning.models import PreparationRun, RunStatus

WINDOW = dt.timedelta(days=30)
MIN_SAMPLES = 3
SAMPLE = 500
CACHE_SECONDS = 300


def _median_minutes(seconds: list[float]) -> int | None:
    if len(seconds) < MIN_SAMPLES:
        return None
    return max(1, round(statistics.median(seconds) / 60))


def minutes_to_preparation(now: dt.datetime) -> int | None:
    """The usual minutes from an order's payment to the start of its preparation (None: too few orders yet)."""
    key = "order_waits:to_preparation"
    cached = cache.get(key)
    if cached is not None:
        return cached or None
    events = OrderEvent.objects.filter(
        created_at__gte=now - WINDOW, to_status__in=(OrderStatus.PAID, OrderStatus.PREPARING)
    ).order_by("-created_at", "-pk")[:SAMPLE]
    paid_at: dict[int, dt.datetime] = {}
    waits = []
    rows = sorted(events.values_list("order_id", "to_status", "created_at"), key=lambda row: row[2])
    for order_id, to_status, at in rows:
        if to_status == OrderStatus.PAID:
            paid_at[order_id] = at
        elif order_id in paid_at:
            waits.append((at - paid_at.pop(order_id)).total_seconds())
    minutes = _median_minutes(waits)
    cache.set(key, minutes or 0, CACHE_SECONDS)
    return minutes


def preparation_minutes(now: dt.datetime) -> int | None:
    """The usual minutes a preparation that passed ran (None: too few yet)."""
    key = "order_waits:preparation"
    cached = cache.get(key)
    if cached is not None:
        return cached or None
    runs = PreparationRun.objects.filter(
        status=RunStatus.PASSED, finished_at__gte=now - WINDOW, started_at__isnull=False
    ).order_by("-finished_at")[:SAMPLE]
    spans = runs.values_list("started_at", "finished_at")
    minutes = _median_minutes([(end - start).total_seconds() for start, end in spans if start and end])
    cache.set(key, minutes or 0, CACHE_SECONDS)
    return minutes


def minutes_left(percent: int | None, now: dt.datetime) -> int | None:
    """About how many minutes the preparation has left at `percent` (None: unknown)."""
    typical = preparation_minutes(now)
    if typical is None or percent is None:
        return None
    return max(1, round(typical * (100 - percent) / 100))

"""What /metrics reports about the shop's rows, computed from PostgreSQL at each scrape.

Every family here is read from the database when Prometheus asks, never kept in a process's memory: the web
workers, the Celery workers and beat all write the rows, so whichever process answers the scrape reports the
same numbers, and a restart loses nothing. Whole-history numbers (orders by status, finished preparation runs,
unexpected outflows) are tallies that PostgreSQL triggers keep in the writer's transaction (core/tallies): a scrape
reads a few rows whatever the history. The counters (`*_total`) count arrivals (a run finishing, an outflow seen)
or a column incremented in the database at each failure (`Network.rpc_errors`): they only grow, as Prometheus
expects of a counter, even when the retention pass later deletes the rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db.models import Count, Min, Model, OuterRef, QuerySet, Subquery
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.tallies.reading import tallied
from fleet.models import Node, NodeState
from orders.capacity import lots_available
from orders.models import Order, OrderEvent, OrderStatus, OutgoingEmail
from payments.models import Network, PaymentRequest, ProviderUsage, Refund, ScanCursor
from payments.rpc_config import rpc_urls
from provisioning.auto_prepare import AUTO_ACTOR
from provisioning.models import PreparationRun, RunStatus
from provisioning.rented_node_health import probe_ages

# A payment is open while its order waits for the money.
OPEN_ORDER_STATUSES = (OrderStatus.AWAITING_PAYMENT, OrderStatus.PAYMENT_REPORTED)
# A preparation run's outcome, once it has one.
FINISHED_RUN_STATUSES = (RunStatus.PASSED, RunStatus.FAILED, RunStatus.ERROR, RunStatus.REFUSED)


def _counts(rows: QuerySet[Model], field: str, values: Iterable[str], *, tally: str = "") -> dict[str, int]:
    """Every value of a status field with its count, zeros included: a series that vanishes at zero breaks
    `rate()` and alerts that compare with it. Read from the tally that the database keeps for whole-history
    tables (core/tallies), counted where none is kept."""
    found = tallied(tally) if tally else dict(rows.values_list(field).annotate(n=Count("pk")).values_list(field, "n"))
    return {str(value): found.get(value, 0) for value in values}


def _total(*, tally: str) -> int:
    """A whole table's count, from its tally."""
    return tallied(tally).get("", 0)


def oldest_in_status_seconds(status: str, now: dt.datetime) -> float:
    """How long the order that has waited longest in `status` has been in it (0 when none is)."""
    entered = (
        OrderEvent.objects.filter(order=OuterRef("pk"), to_status=status).order_by("-created_at").values("created_at")
    )
    since = (
        Order.objects.filter(status=status)
        .annotate(entered=Subquery(entered[:1]))
        .aggregate(oldest=Min("entered"))["oldest"]
    )
    return max(0.0, (now - since).total_seconds()) if since else 0.0


def paid_waiting_on_person_seconds(now: dt.datetime) -> float:
    """The paid orders that wait on an operator's "Prepare": all of them, or with AUTO_PREPARE on (their
    preparation starts by itself) only those whose automatic start could not start it, since it said so."""
    if not settings.AUTO_PREPARE:
        return oldest_in_status_seconds(OrderStatus.PAID, now)
    gave_up = OrderEvent.objects.filter(
        order=OuterRef("pk"), from_status=OrderStatus.PAID, to_status=OrderStatus.PAID, actor=AUTO_ACTOR
    ).order_by("-created_at")
    since = (
        Order.objects.filter(status=OrderStatus.PAID)
        .annotate(waits=Subquery(gave_up.values("created_at")[:1]))
        .aggregate(oldest=Min("waits"))["oldest"]
    )
    return max(0.0, (now - since).total_seconds()) if since else 0.0


def _shop(now: dt.datetime) -> Iterator[Metric]:
    orders = GaugeMetricFamily("shop_orders", "Orders by status.", labels=["status"])
    for status, n in _counts(Order.objects.all(), "status", OrderStatus.values, tally="shop_orders").items():
        orders.add_metric([status], n)
    yield orders
    yield GaugeMetricFamily("shop_lots_available", "Lots that can be sold now.", value=lots_available(now))
    yield GaugeMetricFamily(
        "shop_paid_unprepared_oldest_seconds",
        "How long the paid order that has waited longest on a person for its preparation has waited (0: none waits).",
        value=paid_waiting_on_person_seconds(now),
    )
    yield GaugeMetricFamily(
        "outbox_emails_pending",
        "Customer emails stored and not sent yet.",
        value=OutgoingEmail.objects.filter(sent_at__isnull=True).count(),
    )


def scan_lag_blocks(network: Network, cursor: ScanCursor | None, watching: bool) -> int | None:
    """The chain head (as the last pass saw it) minus the last block the scan has read; None before the first
    pass. With no deposit address watched the scan reads no block and has nothing to fall behind on: 0."""
    if cursor is None or network.head_block is None:
        return None
    if not watching:
        return 0
    return max(0, network.head_block - (cursor.next_block - 1))


def _payments(now: dt.datetime) -> Iterator[Metric]:
    networks = [n for n in Network.objects.filter(enabled=True).order_by("position", "slug") if rpc_urls(n)]
    cursors = {c.network_id: c for c in ScanCursor.objects.filter(network__in=networks)}
    watching = PaymentRequest.objects.watched(now).exists()
    open_by_network = dict(
        PaymentRequest.objects.filter(order__status__in=OPEN_ORDER_STATUSES)
        .values_list("asset__network__slug")
        .annotate(n=Count("pk"))
        .values_list("asset__network__slug", "n")
    )
    label = ["network"]
    open_ = GaugeMetricFamily("payments_open", "Payment requests whose order waits for the money.", labels=label)
    lag = GaugeMetricFamily(
        "payments_scan_lag_blocks", "The chain head minus the last block the scan has read.", labels=label
    )
    budget = GaugeMetricFamily(
        "payments_scan_lag_budget_blocks", "How far the scan may fall behind before an alert.", labels=label
    )
    last = GaugeMetricFamily(
        "payments_scan_last_success_timestamp_seconds", "When the last complete scan pass ended.", labels=label
    )
    up = GaugeMetricFamily(
        "payments_network_up",
        "1 when the last contact with the network's RPC worked, 0 when it failed.",
        labels=label,
    )
    errors = CounterMetricFamily(
        "payments_rpc_errors", "Scan passes and checks that found no working RPC provider.", labels=label
    )
    for network in networks:
        slug = [network.slug]
        cursor = cursors.get(network.pk)
        open_.add_metric(slug, open_by_network.get(network.slug, 0))
        budget.add_metric(slug, network.scan_lag_budget_blocks)
        errors.add_metric(slug, network.rpc_errors)
        if (blocks := scan_lag_blocks(network, cursor, watching)) is not None:
            lag.add_metric(slug, blocks)
        if cursor is not None and cursor.last_pass_at is not None:
            last.add_metric(slug, cursor.last_pass_at.timestamp())
        if network.rpc_ok is not None:  # unknown before the first pass
            up.add_metric(slug, 1 if network.rpc_ok else 0)
    yield from (open_, lag, budget, last, up, errors)
    yield from _provider_usage(networks)
    yield CounterMetricFamily(
        "payments_unexpected_outflows",
        "Transfers out of a deposit address that no refund or sweep explains (a leaked key?).",
        value=_total(tally="payments_unexpected_outflows"),
    )
    yield GaugeMetricFamily(
        "payments_refunds_planned_again",
        "Approved refunds that two treasury plans or more named: paid and not recorded yet, or a plan not run.",
        value=Refund.objects.planned_again().count(),
    )
    yield GaugeMetricFamily(
        "payments_review_oldest_seconds",
        "How long the order that has waited longest for a payment reviewer has waited (0: none waits).",
        value=oldest_in_status_seconds(OrderStatus.NEEDS_REVIEW, now),
    )


# What the scan asked of each provider (payments.provider_usage): the plan's budget, and its rate limits.
PROVIDER_COUNTERS = {
    "calls": "JSON-RPC calls the scan sent to the provider (a batch of n counts n, as providers bill them).",
    "requests": "HTTP requests the scan sent to the provider.",
    "response_bytes": "Bytes the provider answered the scan.",
    "rate_limited": "Requests the provider answered with a rate limit (HTTP 429 or 'too many requests').",
}


def _provider_usage(networks: list[Network]) -> Iterator[Metric]:
    rows = list(
        ProviderUsage.objects.filter(network__in=networks).select_related("network").order_by("network", "provider")
    )
    for field, documentation in PROVIDER_COUNTERS.items():
        family = CounterMetricFamily(f"payments_rpc_{field}", documentation, labels=["network", "provider"])
        for row in rows:
            family.add_metric([row.network.slug, row.provider], getattr(row, field))
        yield family


def _provisioning() -> Iterator[Metric]:
    nodes = GaugeMetricFamily("provisioning_nodes", "GPU nodes by state.", labels=["state"])
    for state, n in _counts(Node.objects.all(), "state", NodeState.values).items():
        nodes.add_metric([state], n)
    yield nodes
    runs = CounterMetricFamily("provisioning_preparations", "Preparation runs finished, by result.", labels=["result"])
    finished = _counts(PreparationRun.objects.all(), "status", FINISHED_RUN_STATUSES, tally="provisioning_preparations")
    for result, n in finished.items():
        runs.add_metric([result], n)
    yield runs

    # Rented nodes' health probes (provisioning/rented_node_health.py); degraded nodes are
    # provisioning_nodes{state="degraded"}.
    ages = GaugeMetricFamily(
        "provisioning_node_health_age_seconds", "Seconds since the newest health probe of each rented node.",
        labels=["node"],
    )  # fmt: skip
    for name, seconds in probe_ages(timezone.now()):
        ages.add_metric([name], seconds)
    yield ages
    yield GaugeMetricFamily(
        "provisioning_node_health_interval_seconds", "How often rented nodes are probed (NODE_HEALTH_PROBE_MINUTES).",
        value=60 * settings.NODE_HEALTH_PROBE_MINUTES,
    )  # fmt: skip


class RowsCollector(Collector):
    """prometheus-client calls collect() at each scrape."""

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        yield from _shop(now)
        yield from _payments(now)
        yield from _provisioning()

"""How long each kind of history is kept, and the beat pass that carries it out (README, "Retention").

Three kinds of rows. Money evidence (credits, refunds, sweeps, outflows, payment and order events, manifests,
rental credits) is kept: nothing here deletes it (an accounting period is the treasurer's to set before any
such rule is written). Operational rows (background jobs done or given up, sent emails, node probes and checks,
preparation logs) go after a setting each, counted in days. Personal data goes as the privacy page says: a job
that gave up keeps its arguments (a "Find my order" job holds the typed address) no longer than a finished one,
and an order that expired unpaid (no transfer ever reached its address) is no sale: it goes whole, its payment
request, events and the customer's contact data with it, UNPAID_ORDER_KEEP_DAYS after its last change.

Each rule deletes (or blanks) in batches of PRUNE_BATCH rows, each batch its own short statement, so that no pass
holds a long lock on a table the shop writes to.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from core.jobs.models import Job
from core.latest_rows import latest_rows
from fleet.models import Node
from orders.models import Extension, Order, OrderStatus, OutgoingEmail, RentalCredit
from payments.models import Credit, PaymentRequest
from provisioning.models import NodeCheck, NodeHealth, NodeMove, PreparationRun, RunStatus

log = logging.getLogger(__name__)
PRUNE_BATCH = 1_000


@dataclass(frozen=True)
class Rule:
    name: str  # what the README's table and the log call it
    keep_days_setting: str
    rows: Callable[[dt.datetime], QuerySet]  # the rows past their time, for a cutoff
    blank: dict | None = None  # fields to clear instead of deleting the row (what else the row holds is kept)
    delete: Callable[[list[int]], object] | None = None  # deleting a batch that plain delete() cannot

    def keep_days(self) -> int:
        return int(getattr(settings, self.keep_days_setting))


def _checks_past(cutoff: dt.datetime) -> QuerySet:
    # Each node's latest check stays whatever its age: the console shows it on the node's row.
    newest_first = ("-created_at", "-pk")
    latest = latest_rows(NodeCheck.objects.all(), parent="node", parent_ids=Node.objects.values_list("pk", flat=True),
                         newest_first=newest_first)  # fmt: skip
    return NodeCheck.objects.filter(finished_at__lt=cutoff).exclude(pk__in=[row.pk for row in latest.values()])


def _unpaid_past(cutoff: dt.datetime) -> QuerySet:
    # Expired without a single transfer seen (a late one went to review and stays). What protects an order (an
    # extension, time given back, a move) cannot exist for one that never ran; one that does all the same is
    # skipped rather than stop the pass for every rule after it, hour after hour.
    transfers = Credit.objects.filter(payment__order=OuterRef("pk"))
    protected = [model.objects.filter(order=OuterRef("pk")) for model in (Extension, RentalCredit, NodeMove)]
    unpaid = Order.objects.filter(status=OrderStatus.EXPIRED, updated_at__lt=cutoff).exclude(Exists(transfers))
    for rows in protected:
        unpaid = unpaid.exclude(Exists(rows))
    return unpaid


def _unpaid_delete(order_ids: list[int]) -> None:
    with transaction.atomic():  # the payment requests first (they protect their order), then the orders
        PaymentRequest.objects.filter(order_id__in=order_ids, credits__isnull=True).delete()
        Order.objects.filter(pk__in=order_ids).delete()


RULES: tuple[Rule, ...] = (
    Rule(
        "background jobs done or given up",
        "JOB_KEEP_DAYS",
        lambda cutoff: Job.objects.filter(Q(done_at__lt=cutoff) | Q(gave_up_at__lt=cutoff)),
    ),
    Rule("emails sent", "EMAIL_KEEP_DAYS", lambda cutoff: OutgoingEmail.objects.filter(sent_at__lt=cutoff)),
    Rule(
        "rented nodes' health probes",
        "NODE_HEALTH_KEEP_DAYS",
        lambda cutoff: NodeHealth.objects.filter(checked_at__lt=cutoff),
    ),
    Rule("node checks and probes of idle nodes", "NODE_CHECK_KEEP_DAYS", _checks_past),
    Rule(
        "preparation logs",
        "RUN_LOG_KEEP_DAYS",
        lambda cutoff: (
            PreparationRun.objects.filter(finished_at__lt=cutoff)
            .exclude(log="")
            .exclude(status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
        ),
        blank={"log": ""},
    ),
    Rule("orders expired unpaid", "UNPAID_ORDER_KEEP_DAYS", _unpaid_past, delete=_unpaid_delete),
)


def history_prune(*, now: dt.datetime) -> dict[str, int]:
    """Beat: each rule's rows past their time go (or have their fields blanked), in batches. Idempotent: a pass cut
    short leaves the rest to the next. Returns {rule: rows}."""
    done = {}
    for rule in RULES:
        cutoff = now - dt.timedelta(days=rule.keep_days())
        count = 0
        rows = rule.rows(cutoff)  # built once (each node's latest check read once): each batch re-runs its query
        model = rows.model
        while batch := list(rows.order_by().values_list("pk", flat=True)[:PRUNE_BATCH]):
            if rule.blank:
                count += model.objects.filter(pk__in=batch).update(**rule.blank)
            elif rule.delete:
                rule.delete(batch)
                count += len(batch)
            else:
                model.objects.filter(pk__in=batch).delete()
                count += len(batch)
        done[rule.name] = count
        if count:
            log.info("retention: %s rows of %s older than %s days", count, rule.name, rule.keep_days())
    return done

"""How long each kind of history is kept, and the beat pass that carries it out (docs/operating.md, "Retention").

Three kinds of rows. Money evidence (credits, refunds, sweeps, outflows, payment and order events, manifests,
rental credits) is kept for the accounting period, MONEY_EVIDENCE_KEEP_DAYS (ten years by default), after the
order's last change; then the order goes whole with it, and only an order whose books are closed: finished, no
money left on its addresses and none still watched, no refund, sweep, credit or preparation still open. What
/metrics counts stays counted (core/tallies: a counter never goes down). Operational rows (background jobs done or
given up, sent emails, node probes and checks, preparation logs) go after a setting each, counted in days. Personal
data goes as the privacy page says: a job that gave up keeps its arguments (a "Find my order" job holds the typed
address) no longer than a finished one, and an order that expired unpaid (no transfer ever reached its address) is
no sale: it goes whole, its payment request, events and the customer's contact data with it, UNPAID_ORDER_KEEP_DAYS
after its last change.

Each rule deletes (or blanks) in batches of PRUNE_BATCH rows, each batch its own short statement, so that no pass
holds a long lock on a table the shop writes to.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Model, OuterRef, Q, QuerySet

from core.jobs.models import Job
from core.latest_rows import latest_rows
from fleet.models import Node
from orders.models import EXTENSION_OPEN_STATUSES, Extension, Order, OrderStatus, OutgoingEmail, RentalCredit
from payments.models import Credit, PaymentRequest, Refund, RefundStatus, Sweep, UnexpectedOutflow
from provisioning.models import MoveStatus, NodeCheck, NodeHealth, NodeMove, PreparationRun, RunStatus

log = logging.getLogger(__name__)
PRUNE_BATCH = 1_000
ORDER_CLOSED = (OrderStatus.ENDED, OrderStatus.CANCELLED, OrderStatus.EXPIRED)
REFUND_CLOSED = (RefundStatus.CONFIRMED, RefundStatus.REJECTED)
MOVE_CLOSED = (MoveStatus.DONE, MoveStatus.FAILED, MoveStatus.NO_NODE)

RowT = TypeVar("RowT", bound=Model)  # the model of a rule's rows


@dataclass(frozen=True)
class Rule(Generic[RowT]):
    name: str  # what the table of docs/operating.md and the log call it
    keep_days_setting: str
    rows: Callable[[dt.datetime], QuerySet[RowT]]  # the rows past their time, for a cutoff
    # fields to clear instead of deleting the row (what else the row holds is kept)
    blank: dict[str, object] | None = None
    delete: Callable[[list[int]], object] | None = None  # deleting a batch that plain delete() cannot
    # For rows whose test joins other tables: `rows` is then only an index's range (a status, a last change) and
    # `narrow` applies the joins to each batch of those ids. The planner cannot know that the finished orders
    # past a cutoff are few once the pass has run (a status and a date are not independent): asked in one query
    # it reads every credit of the history to exclude the few; given the ids, it looks up each one.
    narrow: Callable[[QuerySet[RowT], dt.datetime], QuerySet[RowT]] | None = None

    def keep_days(self) -> int:
        return int(getattr(settings, self.keep_days_setting))


def _checks_past(cutoff: dt.datetime) -> QuerySet[NodeCheck]:
    # Each node's latest check stays whatever its age: the console shows it on the node's row.
    newest_first = ("-created_at", "-pk")
    latest = latest_rows(NodeCheck.objects.all(), parent="node", parent_ids=Node.objects.values_list("pk", flat=True),
                         newest_first=newest_first)  # fmt: skip
    return NodeCheck.objects.filter(finished_at__lt=cutoff).exclude(pk__in=[row.pk for row in latest.values()])


def _unpaid_only(orders: QuerySet[Order], cutoff: dt.datetime) -> QuerySet[Order]:
    # Expired without a single transfer seen (a late one went to review and stays). What protects an order (an
    # extension, time given back, a move) cannot exist for one that never ran; one that does all the same is
    # skipped rather than stop the pass for every rule after it, hour after hour.
    transfers = Credit.objects.filter(payment__order=OuterRef("pk"))
    protected = [model.objects.filter(order=OuterRef("pk")) for model in (Extension, RentalCredit, NodeMove)]
    unpaid = orders.exclude(Exists(transfers))
    for rows in protected:
        unpaid = unpaid.exclude(Exists(rows))
    return unpaid


def _unpaid_delete(order_ids: list[int]) -> None:
    with transaction.atomic():  # the payment requests first (they protect their order), then the orders
        PaymentRequest.objects.filter(order_id__in=order_ids, credits__isnull=True).delete()
        Order.objects.filter(pk__in=order_ids).delete()


def _books_closed(orders: QuerySet[Order], cutoff: dt.datetime) -> QuerySet[Order]:
    # Past the accounting period, and nothing on it that could still move money or machines: a late transfer, an
    # address the books say holds money (forgetting it would leave money unswept), an open refund or sweep.
    payments = PaymentRequest.objects.filter(order=OuterRef("pk"))
    still_open = [
        payments.filter(Q(holds_money=True) | Q(watch_until__gte=cutoff) | Q(plan_watch_until__gte=cutoff)),
        Credit.objects.filter(payment__order=OuterRef("pk"), final=False, removed_at__isnull=True),
        Sweep.objects.filter(payment__order=OuterRef("pk"), final=False, removed_at__isnull=True),
        Refund.objects.filter(payment__order=OuterRef("pk")).exclude(status__in=REFUND_CLOSED),
        Extension.objects.filter(order=OuterRef("pk"), status__in=EXTENSION_OPEN_STATUSES),
        NodeMove.objects.filter(order=OuterRef("pk")).exclude(status__in=MOVE_CLOSED),
        PreparationRun.objects.filter(order=OuterRef("pk"), status__in=(RunStatus.QUEUED, RunStatus.RUNNING)),
    ]
    closed = orders
    for rows in still_open:
        closed = closed.exclude(Exists(rows))
    return closed


def _closed_delete(order_ids: list[int]) -> None:
    """An order and all its evidence, in one transaction: what protects a row goes before it."""
    with transaction.atomic():
        payments = PaymentRequest.objects.filter(order_id__in=order_ids)
        for money in (Credit, Refund, Sweep, UnexpectedOutflow):
            money.objects.filter(payment__in=payments).delete()
        payments.delete()
        for protecting in (Extension, RentalCredit, NodeMove):
            protecting.objects.filter(order_id__in=order_ids).delete()
        Order.objects.filter(pk__in=order_ids).delete()


# Rules of different models side by side: each one's `rows` and `narrow` agree on its own.
RULES: tuple[Rule[Any], ...] = (
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
    Rule(
        "orders expired unpaid",
        "UNPAID_ORDER_KEEP_DAYS",
        lambda cutoff: Order.objects.filter(status=OrderStatus.EXPIRED, updated_at__lt=cutoff),
        delete=_unpaid_delete,
        narrow=_unpaid_only,
    ),
    Rule(
        "orders past the accounting period, with their money evidence",
        "MONEY_EVIDENCE_KEEP_DAYS",
        lambda cutoff: Order.objects.filter(status__in=ORDER_CLOSED, updated_at__lt=cutoff),
        delete=_closed_delete,
        narrow=_books_closed,
    ),
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
        for batch in _batches(rule, rows, cutoff):
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


def _batches(rule: Rule[RowT], rows: QuerySet[RowT], cutoff: dt.datetime) -> Iterator[list[int]]:
    """The ids of the rows that go, PRUNE_BATCH at a time, each batch read after the one before it went."""
    if rule.narrow is None:
        while batch := list(rows.order_by().values_list("pk", flat=True)[:PRUNE_BATCH]):
            yield batch
        return
    candidates = list(rows.order_by().values_list("pk", flat=True))  # the index's range: what stays, and the due
    for start in range(0, len(candidates), PRUNE_BATCH):
        # The model's only manager (`objects`): the stubs' Model does not name `objects`.
        some = rows.model._default_manager.filter(pk__in=candidates[start : start + PRUNE_BATCH])
        if batch := list(rule.narrow(some, cutoff).order_by().values_list("pk", flat=True)):
            yield batch

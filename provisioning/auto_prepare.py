"""Automatic preparation (AUTO_PREPARE): a paid order's preparation starts by itself, and operators can stop one.

The order domain cannot call provisioning: when an order becomes paid with AUTO_PREPARE on, its payment outcome
stores a PREPARATION_AUTO job in the same transaction (orders/payment_outcome.py), and the job's task calls
`preparation_auto` here. The start is the operators' own (preparation_start: the order's preparation, the full
preflight, a bad node fails its run and the order moves on as today), recorded with the actor AUTO_ACTOR, which
the console shows. An order the start cannot serve (no free node) stays paid with a note: it waits on a person,
and only such orders count in the "paid order waiting" metric (config/metrics.py).
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from fleet.models import Node, NodeState
from orders import capacity
from orders.models import Order, OrderEvent, OrderStatus
from orders.orders import order_note, order_transition
from provisioning.access import access_withdraw_request
from provisioning.models import AccessGrant, PreparationRun, RunStatus
from provisioning.prepare import OPEN_RUNS, PreparationError, preparation_start
from provisioning.states import nodes_transition, run_transition

log = logging.getLogger(__name__)
S = OrderStatus
AUTO_ACTOR = "auto"
AUTO_START_FAILED = "automatic preparation could not start"


def preparation_auto(*, order_id: int) -> bool:
    """The job of an order paid with AUTO_PREPARE on: its preparation starts, unless the order is no longer paid
    (started by an operator, stopped, refunded): then nothing happens. True when it started."""
    try:
        runs = preparation_start(order_id=order_id, actor=AUTO_ACTOR, only_paid=True)
    except PreparationError as exc:  # e.g. no free node for a lot that moved: a person decides
        with transaction.atomic():
            order = Order.objects.select_for_update().get(pk=order_id)
            if order.status == S.PAID:
                order_note(order=order, actor=AUTO_ACTOR, reason=f"{AUTO_START_FAILED}: {exc}", now=timezone.now())
        log.warning("order %s: %s: %s", order_id, AUTO_START_FAILED, exc)
        return False
    return bool(runs)


def started_automatically(order: Order) -> bool:
    """Whether the order's current preparation was started by AUTO_PREPARE (its last move to preparing)."""
    last = OrderEvent.objects.filter(order=order, to_status=S.PREPARING).exclude(from_status=S.PREPARING).last()
    return last is not None and last.actor == AUTO_ACTOR


def preparation_stop(*, order_id: int, actor: str) -> int:
    """An operator stops a preparation: its open runs end in error ("stopped by <actor>"), the access made so far
    is withdrawn, its nodes that hold none go back to available (still held for the order), and the order is
    preparation_failed, waiting for a person (Retry starts it again). Returns the runs stopped. A worker in the
    middle of a run finds it ended and writes nothing; an account it makes afterwards is withdrawn by beat's
    safety net (access_left_live_withdraw)."""
    now = timezone.now()
    reason = f"stopped by {actor}"
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        order = Order.objects.select_for_update().get(pk=order_id)
        if order.status != S.PREPARING:
            raise PreparationError(f"order {order.reference} is {order.status}: only a preparation running is stopped")
        runs = list(PreparationRun.objects.select_for_update().filter(order=order, status__in=OPEN_RUNS))
        for run in runs:
            PreparationRun.objects.filter(pk=run.pk).update(error=reason, step="stopped")
            run_transition(run=run, to=RunStatus.ERROR, actor=actor, reason=reason, now=now)
        order_transition(order=order, to=S.PREPARATION_FAILED, actor=actor, reason=f"preparation {reason}", now=now)
        withdrawn = access_withdraw_request(order=order, now=now)  # nodes with an account: revoking, then free
        with_account = set(AccessGrant.objects.filter(pk__in=withdrawn).values_list("node_id", flat=True))
        idle = [run.node_id for run in runs if run.node_id not in with_account]
        preparing = list(Node.objects.filter(pk__in=idle, state=NodeState.PREPARING).values_list("pk", flat=True))
        nodes_transition(node_ids=preparing, to=NodeState.AVAILABLE, actor=actor, reason=reason, now=now)
    log.info("order %s: preparation %s (%d run(s))", order.reference, reason, len(runs))
    return len(runs)

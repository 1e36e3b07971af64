"""What waits on a human, in one list, oldest first: the "Needs attention" list at the top of /ops/.

Paid orders not prepared yet, payments in review (an order's, or an extension's), failed preparations,
failed or maintenance nodes, unacknowledged unexpected outflows, refunds waiting for a reviewer's approval.
Each item's age runs from the moment it started waiting (the event that moved the row to its status; an
outflow's detection), and its link goes to where it is handled: the console's own section, or the admin page
of the row. Read only."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import DateTimeField, F, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse

from orders.models import Extension, ExtensionEvent, ExtensionStatus, Order, OrderEvent, OrderStatus
from payments.models import Refund, RefundEvent, RefundStatus, UnexpectedOutflow
from provisioning.models import Node, NodeEvent, NodeState

S = OrderStatus


@dataclass(frozen=True)
class Attention:
    kind: str  # one of KINDS
    title: str
    detail: str
    since: dt.datetime
    link: str


KINDS = {
    "paid": "Paid, not prepared",
    "review": "Payment in review",
    "preparation_failed": "Preparation failed",
    "node": "Node out of sale",
    "outflow": "Unexpected outflow",
    "refund": "Refund to approve",
}


def _entered(events, status_field: str, to: str) -> Subquery:
    """When the row last moved to `to` (its newest such event)."""
    latest = events.filter(**{status_field: to}).order_by("-created_at").values("created_at")[:1]
    return Subquery(latest, output_field=DateTimeField())


def needs_attention() -> list[Attention]:
    console = reverse("provisioning:console")
    items: list[Attention] = []
    for status, kind, anchor in (
        (S.PAID, "paid", "#waiting-title"),
        (S.NEEDS_REVIEW, "review", ""),
        (S.PREPARATION_FAILED, "preparation_failed", "#failed-title"),
    ):
        entered = _entered(OrderEvent.objects.filter(order=OuterRef("pk")), "to_status", status)
        orders = Order.objects.filter(status=status)
        for order in orders.annotate(since=Coalesce(entered, F("created_at"))):
            link = console + anchor if anchor else _review_link(order)
            detail = f"{order.lots} lot{'s' if order.lots != 1 else ''}, {order.duration_days} days"
            items.append(Attention(kind, order.reference, detail, order.since, link))
    for state in (NodeState.FAILED, NodeState.MAINTENANCE):
        entered = _entered(NodeEvent.objects.filter(node=OuterRef("pk")), "to_state", state)
        for node in Node.objects.filter(state=state).annotate(since=Coalesce(entered, F("created_at"))):
            link = reverse("admin:provisioning_node_change", args=[node.pk])
            detail = f"{node.get_state_display()}: {node.state_reason[:200]}" if node.state_reason else node.state
            items.append(Attention("node", node.name, detail, node.since, link))
    for outflow in UnexpectedOutflow.objects.filter(acknowledged_at__isnull=True).select_related("payment__order"):
        detail = f"{outflow.amount_base_units} base units to {outflow.to_address}, tx {outflow.tx_hash}"
        items.append(Attention("outflow", outflow.payment.order.reference, detail, outflow.created_at,
                               console + "#outflows-title"))
    # An extension's payment in review: its order stays active meanwhile, so it is found by the extension.
    review = ExtensionStatus.NEEDS_REVIEW
    entered = _entered(ExtensionEvent.objects.filter(extension=OuterRef("pk")), "to_status", review)
    extensions = Extension.objects.filter(status=review).select_related("order", "payment")
    for extension in extensions.annotate(since=Coalesce(entered, F("created_at"))):
        detail = f"extension of {extension.duration_days} days"
        link = reverse("admin:payments_paymentrequest_change", args=[extension.payment.pk])
        items.append(Attention("review", extension.order.reference, detail, extension.since, link))
    pending = RefundStatus.PENDING_APPROVAL
    entered = _entered(RefundEvent.objects.filter(refund=OuterRef("pk")), "to_status", pending)
    refunds = Refund.objects.filter(status=pending).select_related("payment__order")
    for refund in refunds.annotate(since=Coalesce(entered, F("created_at"))):
        detail = f"{refund.get_reason_display()}: {refund.amount_base_units} base units {refund.symbol}".strip()
        link = reverse("admin:payments_refund_change", args=[refund.pk])
        items.append(Attention("refund", refund.payment.order.reference, detail, refund.since, link))
    return sorted(items, key=lambda item: item.since)



def _review_link(order: Order) -> str:
    payment = getattr(order, "payment", None)
    if payment is None:
        return reverse("admin:shop_order_change", args=[order.pk])
    return reverse("admin:payments_paymentrequest_change", args=[payment.pk])

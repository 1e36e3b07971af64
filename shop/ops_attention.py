"""What waits on a human, in one list, oldest first: the "Needs attention" list at the top of /ops/, and the
queue on the admin's start page.

Paid orders not prepared yet, payments in review (an order's, or an extension's), failed preparations, failed,
maintenance or degraded nodes (rented, their health probe failing), unacknowledged unexpected outflows, refunds
waiting for a reviewer's approval, approved refunds waiting for the treasurer's signer. Each item's age runs from
the moment it started waiting (the event that moved the row to its status; an outflow's detection), and its link
goes to where it is handled: the console's own section, or the admin page of the row. Each kind names the
permission that acts on it and who holds it (ACTORS): a person is shown what their role can act on, and told how
much waits on others (attention_for). Amounts are in units with their symbol. Rentals whose move to a spare node
ended without one (provisioning.moves.moves_waiting) wait on an operator too, and so do the files a move left on its
old node (moves_keeping_files) until someone releases them, and the downtime held because the tenant could have
caused it (provisioning.downtime) until someone decides. Read only."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models import DateTimeField, F, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils.translation import npgettext, pgettext, pgettext_lazy

from core.roles import ROLE_TITLES
from core.staff_words import days_text, lots_text
from fleet.models import Node, NodeEvent, NodeState
from orders.models import FIRST_PAYMENTS, Extension, ExtensionEvent, ExtensionStatus, Order, OrderEvent, OrderStatus
from payments.amount_text import movement_units_text, refund_units_text, with_asset
from payments.checkout import order_first_payment
from payments.models import Credit, PaymentRequest, Refund, RefundEvent, RefundStatus, UnexpectedOutflow
from payments.review import payment_evidence
from provisioning.downtime import downtime_holds_waiting
from provisioning.moves import moves_keeping_files, moves_waiting

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractUser, AnonymousUser

S = OrderStatus


@dataclass(frozen=True)
class Attention:
    kind: str  # one of KINDS
    title: str
    detail: str
    since: dt.datetime
    link: str


KINDS = {
    "paid": pgettext_lazy("staff", "Paid, not prepared"),
    "review": pgettext_lazy("staff", "Payment in review"),
    "extension_review": pgettext_lazy("staff", "Extension payment in review"),
    "preparation_failed": pgettext_lazy("staff", "Preparation failed"),
    "node": pgettext_lazy("staff", "Node out of sale"),
    "move": pgettext_lazy("staff", "Rental to move"),
    "move_files": pgettext_lazy("staff", "Files kept after a move"),
    "downtime": pgettext_lazy("staff", "Downtime to decide"),
    "outflow": pgettext_lazy("staff", "Unexpected outflow"),
    "refund": pgettext_lazy("staff", "Refund to approve"),
    "refund_to_pay": pgettext_lazy("staff", "Refund approved, to pay"),
}

# Who acts on each kind: the permission its page asks for, and the role that holds it (core/roles.py).
ACTORS = {
    "paid": ("provisioning.prepare_order", "operator"),
    "preparation_failed": ("provisioning.prepare_order", "operator"),
    "node": ("fleet.change_node", "operator"),
    "move": ("provisioning.prepare_order", "operator"),
    "move_files": ("provisioning.prepare_order", "operator"),
    "downtime": ("provisioning.prepare_order", "operator"),
    "outflow": ("provisioning.prepare_order", "operator"),  # acknowledged in the console
    "review": ("payments.review_payment", "reviewer"),
    "extension_review": ("payments.review_payment", "reviewer"),
    "refund": ("payments.review_payment", "reviewer"),
    "refund_to_pay": ("payments.plan_treasury", "treasurer"),
}

# The admin start page's queue: for each kind, its heading (plural) and where the whole list of it is.
QUEUE = {
    "review": pgettext_lazy("staff", "Payments in review"),
    "extension_review": pgettext_lazy("staff", "Extension payments in review"),
    "refund": pgettext_lazy("staff", "Refunds to approve"),
    "paid": pgettext_lazy("staff", "Paid orders to prepare"),
    "preparation_failed": pgettext_lazy("staff", "Failed preparations"),
    "node": pgettext_lazy("staff", "Nodes out of sale"),
    "move": pgettext_lazy("staff", "Rentals to move"),
    "move_files": pgettext_lazy("staff", "Files kept on an old node"),
    "downtime": pgettext_lazy("staff", "Downtimes to decide"),
    "outflow": pgettext_lazy("staff", "Unexpected outflows"),
    "refund_to_pay": pgettext_lazy("staff", "Approved refunds to pay"),
}


def _entered(events: QuerySet[Any], status_field: str, to: str) -> Subquery:
    """When the row last moved to `to` (its newest such event)."""
    latest = events.filter(**{status_field: to}).order_by("-created_at").values("created_at")[:1]
    return Subquery(latest, output_field=DateTimeField())


def _with_evidence() -> QuerySet[PaymentRequest]:
    """Payments with their credits on the chain (as `shown`), for a Prefetch."""
    credits = Credit.objects.on_chain().select_related("network", "asset")
    return PaymentRequest.objects.select_related("asset").prefetch_related(
        Prefetch("credits", queryset=credits, to_attr="shown")
    )


def _lots(order: Order) -> str:
    """'1 lot, 7 days', in the reader's language."""
    return f"{lots_text(order.lots)}, {days_text(order.duration_days)}"


def needs_attention() -> list[Attention]:
    console = reverse("provisioning:console")
    items: list[Attention] = []
    first_payments = Prefetch("payments", queryset=_with_evidence().filter(extension=None), to_attr=FIRST_PAYMENTS)
    for status, kind, anchor in (
        (S.PAID, "paid", "#waiting-title"),
        (S.NEEDS_REVIEW, "review", ""),
        (S.PREPARATION_FAILED, "preparation_failed", "#failed-title"),
    ):
        entered = _entered(OrderEvent.objects.filter(order=OuterRef("pk")), "to_status", status)
        orders = Order.objects.filter(status=status).annotate(since=Coalesce(entered, F("created_at")))
        if kind == "review":
            orders = orders.prefetch_related(first_payments)
        for order in orders:
            link, detail = console + anchor, _lots(order)
            if kind == "review":
                link, detail = _review(order, detail)
            items.append(Attention(kind, order.reference, detail, order.since, link))
    # A degraded node is rented and out of sale: its health probe fails (provisioning/rented_node_health.py).
    for state in (NodeState.FAILED, NodeState.MAINTENANCE, NodeState.DEGRADED):
        entered = _entered(NodeEvent.objects.filter(node=OuterRef("pk")), "to_state", state)
        for node in Node.objects.filter(state=state).annotate(since=Coalesce(entered, F("created_at"))):
            link = reverse("admin:fleet_node_change", args=[node.pk])
            state_shown = node.get_state_display()
            detail = f"{state_shown}: {node.state_reason[:200]}" if node.state_reason else state_shown
            items.append(Attention("node", node.name, detail, node.since, link))
    items += _moves_stuck(console)
    items += _moves_keeping_files(console)
    for hold in downtime_holds_waiting():
        window = pgettext("staff", "%(start)s to %(end)s UTC") % {
            "start": f"{hold.down_from:%Y-%m-%d %H:%M}",
            "end": f"{hold.down_until:%Y-%m-%d %H:%M}",
        }
        detail = f"{hold.node.name}, {window}: {hold.causes}"[:300]
        items.append(Attention("downtime", hold.order.reference, detail, hold.created_at, console + "#downtime-title"))
    unacknowledged = UnexpectedOutflow.objects.filter(acknowledged_at__isnull=True)
    outflows = with_asset(unacknowledged).select_related("payment__order")
    for outflow in outflows:
        detail = pgettext("staff", "%(amount)s to %(address)s, transaction %(tx)s") % {
            "amount": movement_units_text(outflow),
            "address": outflow.to_address,
            "tx": outflow.tx_hash,
        }
        items.append(
            Attention(
                "outflow", outflow.payment.order.reference, detail, outflow.created_at, console + "#outflows-title"
            )
        )
    # An extension's payment in review: its order stays active meanwhile, so it is found by the extension.
    review = ExtensionStatus.NEEDS_REVIEW
    entered = _entered(ExtensionEvent.objects.filter(extension=OuterRef("pk")), "to_status", review)
    extensions = (
        Extension.objects.filter(status=review)
        .select_related("order")
        .prefetch_related(Prefetch("payment", queryset=_with_evidence()))
    )
    for extension in extensions.annotate(since=Coalesce(entered, F("created_at"))):
        evidence = payment_evidence(extension.payment, getattr(extension.payment, "shown", None))
        days = extension.duration_days
        detail = npgettext(
            "staff", "extension of %(days)s day; %(evidence)s", "extension of %(days)s days; %(evidence)s", days
        ) % {"days": days, "evidence": evidence.text}
        link = reverse("admin:payments_paymentrequest_change", args=[extension.payment.pk])
        items.append(Attention("extension_review", extension.order.reference, detail, extension.since, link))
    for refund_status, kind in ((RefundStatus.PENDING_APPROVAL, "refund"), (RefundStatus.APPROVED, "refund_to_pay")):
        entered = _entered(RefundEvent.objects.filter(refund=OuterRef("pk")), "to_status", refund_status)
        refunds = Refund.objects.filter(status=refund_status).select_related("payment__order", "network")
        for refund in refunds.annotate(since=Coalesce(entered, F("created_at"))):
            detail = pgettext("staff", "%(reason)s: %(amount)s on %(network)s") % {
                "reason": refund.get_reason_display(),
                "amount": refund_units_text(refund),
                "network": refund.network.name,
            }
            link = reverse("admin:payments_refund_change", args=[refund.pk])
            items.append(Attention(kind, refund.payment.order.reference, detail, refund.since, link))
    return sorted(items, key=lambda item: item.since)


def _moves_stuck(console: str) -> list[Attention]:
    """A move that ended without a spare while the rental is still on its old node (provisioning.moves)."""
    return [
        Attention(
            "move",
            move.order.reference,
            f"{move.from_node.name}: {move.get_status_display()}; {move.error[:200]}",
            move.finished_at or move.created_at,
            console + "#moves-title",
        )
        for move in moves_waiting()
    ]


def _moves_keeping_files(console: str) -> list[Attention]:
    """A move that left files on the old node: kept there until a person releases them (provisioning.moves)."""
    items: list[Attention] = []
    for move in moves_keeping_files():
        report = move.copy_report or {}
        if report.get("reachable", True):
            left = report.get("summary", "")
        else:
            left = pgettext("staff", "the old node did not answer")
        detail = pgettext("staff", "%(node)s keeps the files the move did not copy (%(left)s)") % {
            "node": move.from_node.name,
            "left": left,
        }
        detail = detail[:300]
        link = console + "#moves-title"
        since = move.old_files_kept_at or move.created_at
        items.append(Attention("move_files", move.order.reference, detail, since, link))
    return items


def _review(order: Order, lots: str) -> tuple[str, str]:
    """The link and the detail of an order in review: its first payment's page and evidence."""
    try:
        payment = order_first_payment(order)
    except Order.PaymentMissing:
        return reverse("admin:orders_order_change", args=[order.pk]), lots
    evidence = payment_evidence(payment, getattr(payment, "shown", None))
    detail = f"{lots}; {payment.get_status_display().lower()}: {evidence.text}"
    return reverse("admin:payments_paymentrequest_change", args=[payment.pk]), detail


@dataclass
class Waiting:
    """One person's view of the list: what they can act on, and how much waits on others (by who acts)."""

    mine: list[Attention]
    others: dict[str, int] = field(default_factory=dict)  # role that acts (its name to read) -> how many wait on it


def attention_for(user: AbstractUser | AnonymousUser, items: list[Attention] | None = None) -> Waiting:
    """The items `user` can act on (their role's permissions), oldest first; the rest only counted."""
    items = needs_attention() if items is None else items
    waiting = Waiting(mine=[])
    for item in items:
        permission, role = ACTORS[item.kind]
        if user.has_perm(permission):
            waiting.mine.append(item)
        else:
            title = str(ROLE_TITLES[role])
            waiting.others[title] = waiting.others.get(title, 0) + 1
    return waiting


@dataclass(frozen=True)
class QueueGroup:
    kind: str
    title: str  # QUEUE's heading, translated
    items: list[Attention]
    more_link: str  # the whole list of this kind

    @property
    def count(self) -> int:
        return len(self.items)


def queue_for(user: AbstractUser | AnonymousUser) -> list[QueueGroup]:
    """The admin start page's queue: one group per kind the user acts on, in the order of QUEUE, each with
    its count and its items oldest first (a role's groups are there with 0 too: nothing waits)."""
    mine = attention_for(user).mine
    payments = reverse("admin:payments_paymentrequest_changelist")
    refunds = reverse("admin:payments_refund_changelist")
    console = reverse("provisioning:console")
    more = {
        "review": f"{payments}?review=waiting",
        "extension_review": f"{payments}?review=waiting",
        "refund": f"{refunds}?status__exact={RefundStatus.PENDING_APPROVAL}",
        "refund_to_pay": f"{refunds}?status__exact={RefundStatus.APPROVED}",
        "paid": console + "#waiting-title",
        "preparation_failed": console + "#failed-title",
        "node": reverse("admin:fleet_node_changelist"),
        "move": console + "#moves-title",
        "move_files": console + "#moves-title",
        "downtime": console + "#downtime-title",
        "outflow": console + "#outflows-title",
    }
    return [
        QueueGroup(kind, str(title), [item for item in mine if item.kind == kind], more[kind])
        for kind, title in QUEUE.items()
        if user.has_perm(ACTORS[kind][0])
    ]

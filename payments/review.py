"""Reviewers' decisions on payment exceptions. Each needs a reason and writes an event row."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import pgettext

from core.input_errors import OrderInputError
from orders.models import ExtensionStatus, OrderStatus
from orders.outbox import email_enqueue
from orders.payment_outcome import OrderPaymentOutcome, order_outcome_locks, order_payment_outcome
from payments.amount_text import credit_units_text, payment_units_text
from payments.extension_money import extension_money_came_late, money_arrived_at
from payments.lifecycle import REVIEWER_TRANSITIONS, payment_note, payment_transition
from payments.models import Credit, CreditKind, PaymentRequest, PaymentStatus, RefundReason
from payments.refunds import refunds_follow
from payments.refunds_due import ALL, UNNEEDED, refunds_due_compute, refunds_due_json, refunds_due_text

P = PaymentStatus
# Refunds that give back the money meant to pay the order.
GIVEN_BACK = (RefundReason.LATE, RefundReason.CANCELLED)


class ReviewError(Exception):
    pass


class Decision:
    ACCEPT = "accept"  # the money counts: the order is paid
    REJECT = "reject"  # the money does not count: the order is cancelled, whatever arrived is refunded
    REFUND = "refund"  # flag what must be sent back (an overpayment's excess, or everything)

    choices = [(ACCEPT, "Accept the payment"), (REJECT, "Reject the payment"), (REFUND, "Mark for refund")]


@dataclass(frozen=True)
class Review:
    """One decision in the making, under the payment's row lock."""

    payment: PaymentRequest
    credits: list[Credit]
    reviewer: str
    reason: str
    now: dt.datetime

    @property
    def actor(self) -> str:
        return f"reviewer {self.reviewer}"


def payment_review_decide(*, payment_id: int, decision: str, reason: str, reviewer: str) -> PaymentRequest:
    if not reason.strip():
        raise ReviewError("A reason is required for every decision.")
    now = timezone.now()
    with transaction.atomic():
        # Lock order: nodes (an accepted order may need its lots held again), payment, order.
        order_outcome_locks()
        payment: PaymentRequest = PaymentRequest.objects.select_for_update().get(pk=payment_id)
        credits = list(payment.credits.on_chain().select_related("network", "asset"))
        review = Review(payment=payment, credits=credits, reviewer=reviewer, reason=reason, now=now)
        if decision == Decision.ACCEPT:
            _accept(review)
        elif decision == Decision.REJECT:
            _reject(review)
        elif decision == Decision.REFUND:
            _mark_for_refund(review)
        else:
            raise ReviewError(f"Unknown decision {decision!r}.")
        refunds_follow(payment=payment, now=now, reason=f"decided by reviewer {reviewer}: {reason}")
    return payment


def _refuse_unless_allowed(payment: PaymentRequest, to: str) -> None:
    """Checked before anything is saved: a move outside REVIEWER_TRANSITIONS is a decision made already."""
    if to not in REVIEWER_TRANSITIONS[payment.status]:
        raise ReviewError(f"The payment is already {payment.status}.")


def _accept(review: Review) -> None:
    payment, now = review.payment, review.now
    if not review.credits:
        raise ReviewError("Nothing arrived at this address: there is nothing to accept.")
    if extension_money_came_late(extension_id=payment.extension_id, now=now):
        raise ReviewError("The rental of this extension is over: its money cannot buy days. Reject it to refund it.")
    _refuse_unless_allowed(payment, P.CONFIRMED)
    if payment.refunds.committed().filter(reason__in=GIVEN_BACK).exists():
        raise ReviewError("This money is being refunded (a refund of it was approved): it cannot also pay the order.")
    payment.reviewed_at, payment.reviewed_by, payment.settled_at = now, review.reviewer, now
    if payment.refund_decided_at is None:
        payment.refunds_due = []  # what is on the address now is accepted; later money is due back
    payment.save(update_fields=["reviewed_at", "reviewed_by", "settled_at", "refunds_due"])
    payment_transition(payment=payment, to=P.CONFIRMED, actor=review.actor, reason=review.reason, now=now)
    try:
        order = order_payment_outcome(
            order_id=payment.order_id,
            outcome=OrderPaymentOutcome.PAID,
            actor=review.actor,
            reason=f"payment accepted by a reviewer: {review.reason}",
            now=now,
            hold_missing_lots=True,
            extension_id=payment.extension_id,
            money_arrived_at=money_arrived_at(extension_id=payment.extension_id),
        )
    except OrderInputError as exc:
        raise ReviewError(f"{exc.message} The order's lots were released; free a node first.") from None
    if order.status == OrderStatus.PAID:  # the decision is final (REVIEWER_TRANSITIONS): this is sent once
        email_enqueue(order_id=payment.order_id, name="payment_accepted", params={"payment_id": payment.pk})


def _reject(review: Review) -> None:
    payment, now = review.payment, review.now
    _refuse_unless_allowed(payment, P.REJECTED)
    payment.reviewed_at, payment.reviewed_by = now, review.reviewer
    payment.refunds_due = refunds_due_json(refunds_due_compute(payment=payment, credits=review.credits, scope=ALL))
    payment.refund_decided_at = now
    payment.save(update_fields=["reviewed_at", "reviewed_by", "refunds_due", "refund_decided_at"])
    payment_transition(payment=payment, to=P.REJECTED, actor=review.actor, reason=review.reason, now=now)
    order = order_payment_outcome(
        order_id=payment.order_id,
        outcome=OrderPaymentOutcome.REJECTED,
        actor=review.actor,
        reason=f"payment rejected by a reviewer: {review.reason}",
        now=now,
        extension_id=payment.extension_id,
    )
    if order.status == OrderStatus.CANCELLED:
        email_enqueue(order_id=payment.order_id, name="payment_rejected", params={"payment_id": payment.pk})


def _mark_for_refund(review: Review) -> None:
    """Not a change of status: the decision is kept as a note in the payment's history."""
    payment, now = review.payment, review.now
    # What the order does not need (an excess, stray money), or all of it when it needs none of it.
    due = refunds_due_compute(payment=payment, credits=review.credits, scope=UNNEEDED)
    if payment.status == P.REJECTED or not due:
        due = refunds_due_compute(payment=payment, credits=review.credits, scope=ALL)
    payment.refunds_due, payment.refund_decided_at = refunds_due_json(due), now
    payment.save(update_fields=["refunds_due", "refund_decided_at"])
    reason = f"marked for refund of {refunds_due_text(due)}: {review.reason}"
    payment_note(payment=payment, actor=review.actor, reason=reason, now=now)


@dataclass(frozen=True)
class CreditShown:
    """One transfer as the reviewer's page shows it."""

    tx_hash: str
    link: str  # the network's explorer, or ''
    amount: str
    kind: str
    network: str
    block: int
    time: dt.datetime
    confirmations: int
    final: bool
    after_settlement: bool


@dataclass(frozen=True)
class Evidence:
    """What a reviewer decides on: what was asked, what is on the address in that asset however it came
    (late money too: a `late` credit never counts in `received_base_units`), what came in anything else, and
    each transfer. Amounts in units with their symbol."""

    asked: str
    received: str
    late: bool
    elsewhere: list[str]
    credits: list[CreditShown]
    arrived: bool = True  # anything at all in the asset asked for, late or not

    @property
    def text(self) -> str:
        """'received 899.00 USDC of 899.00 USDC, after the deadline; also 3.00 USDT on local', in the reader's
        language."""
        words = pgettext("staff", "received %(received)s of %(asked)s") % {
            "received": self.received,
            "asked": self.asked,
        }
        if self.late:
            words += pgettext("staff", ", after the deadline")
        if self.elsewhere:
            words += pgettext("staff", "; also %(elsewhere)s") % {"elsewhere": ", ".join(self.elsewhere)}
        return words


def payment_evidence(payment: PaymentRequest, credits: list[Credit] | None = None) -> Evidence:
    """The evidence of one payment, from its credits on the chain (those a reorg removed are left out)."""
    if credits is None:
        credits = list(payment.credits.on_chain().select_related("network", "asset"))
    shown = [credit for credit in credits if credit.on_chain and credit.kind != CreditKind.GAS]
    own = [credit for credit in shown if _in_the_asset_asked_for(payment, credit)]
    elsewhere: dict[tuple[int, str], list[Credit]] = {}
    for credit in shown:
        if credit not in own:
            elsewhere.setdefault((credit.chain_id, credit.token_contract.lower()), []).append(credit)
    return Evidence(
        asked=payment_units_text(payment, payment.amount_base_units),
        received=payment_units_text(payment, sum(int(credit.amount_base_units) for credit in own)),
        late=any(credit.kind == CreditKind.LATE for credit in own),
        elsewhere=[_sum_text(group) for group in elsewhere.values()],
        credits=[_credit_shown(credit) for credit in shown],
        arrived=bool(own),
    )


def _in_the_asset_asked_for(payment: PaymentRequest, credit: Credit) -> bool:
    same_token = credit.token_contract.lower() == (payment.contract or "").lower()
    return credit.chain_id == payment.chain_id and same_token


def _sum_text(credits: list[Credit]) -> str:
    first = credits[0]
    total = Credit(
        asset=first.asset,
        token_contract=first.token_contract,
        amount_base_units=sum(int(credit.amount_base_units) for credit in credits),
    )
    words = pgettext("staff", "%(amount)s on %(network)s")
    return words % {"amount": credit_units_text(total), "network": first.network.slug}


def _credit_shown(credit: Credit) -> CreditShown:
    template = credit.network.explorer_tx_url
    return CreditShown(
        tx_hash=credit.tx_hash,
        link=template.format(tx=credit.tx_hash) if template else "",
        amount=credit_units_text(credit),
        kind=credit.get_kind_display(),
        network=credit.network.name,
        block=credit.block_number,
        time=credit.block_timestamp,
        confirmations=credit.confirmations,
        final=credit.final,
        after_settlement=credit.after_settlement,
    )


def payment_in_review(payment: PaymentRequest) -> bool:
    """Whether a reviewer's decision is awaited: its order (a first payment) or its extension is in review, and
    nobody decided yet."""
    if payment.reviewed_at is not None:
        return False
    if payment.extension_id is not None:
        return payment.extension is not None and payment.extension.status == ExtensionStatus.NEEDS_REVIEW
    return payment.order.status == OrderStatus.NEEDS_REVIEW


def decisions_offered(payment: PaymentRequest) -> list[tuple[str, str, str]]:
    """The (decision, label, emphasis) the payment's page offers: accept and reject, while a review is awaited
    and the status table allows them (and accept only where the money can still pay). Where nothing arrived in
    the asked asset, rejecting leads and accepting is the secondary button that says so: a reviewer who accepts
    then gives away a node for money the chain never showed."""
    if not payment_in_review(payment):
        return []
    allowed = REVIEWER_TRANSITIONS[payment.status]
    nothing_arrived = not payment_evidence(payment).arrived
    offered = []
    # An extension's money that came after its rental ended cannot buy days: it can only be rejected (refunded).
    if P.CONFIRMED in allowed and not extension_money_came_late(extension_id=payment.extension_id, now=timezone.now()):
        if nothing_arrived:
            label = pgettext("staff", "Accept anyway: nothing arrived in this asset (the order is paid)")
        else:
            label = pgettext("staff", "Accept the payment (the order is paid)")
        offered.append((Decision.ACCEPT, label, "secondary" if nothing_arrived else "accept"))
    if P.REJECTED in allowed:
        reject = pgettext("staff", "Reject the payment (the order is cancelled, the money goes back)")
        offered.append((Decision.REJECT, reject, "reject"))
    return sorted(offered, key=lambda decision: decision[2] == "secondary")  # the emphasised one first


def payments_in_review() -> QuerySet[PaymentRequest]:
    """Every payment a reviewer's decision is awaited on (payment_in_review, in the database)."""
    first = Q(extension__isnull=True, order__status=OrderStatus.NEEDS_REVIEW)
    extension = Q(extension__status=ExtensionStatus.NEEDS_REVIEW)
    return PaymentRequest.objects.filter(first | extension, reviewed_at__isnull=True)

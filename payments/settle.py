"""The payment policy, in one place: from a payment's credits to its status and its order's.

| credits (counted)                         | payment       | order          |
| ----------------------------------------- | ------------- | -------------- |
| none                                      | pending       | awaiting (back there after a reorg) |
| matching, not yet final, full amount      | detected      | lots held past the window |
| matching, not yet final, part of it       | detected      | lots held until the window ends |
| matching and final, sum = quote           | confirmed     | paid           |
| matching and final, sum > quote           | overpaid      | paid; excess flagged for refund |
| matching and final, sum < quote           | underpaid     | needs_review; lots held as they were |
| any after the deadline                    | late          | needs_review; lots held as they were |
| ... and the order's lots are gone         | late          | needs_review; all of it due back at once (refund) |
| any on another network or in another token| wrong_network | needs_review; lots held as they were |
| ... beside the full amount of the right one| as if it were not there | as if it were not there; it is due back apart |
"Lots held as they were": until the payment window's end (or a reviewer's extension), or without an end once
the full amount was seen. A top-up to the same address completes an underpayment.
A reviewer's decision (accepted or rejected) is final: later passes only update the figures.
Once settled (confirmed, overpaid, or accepted by a reviewer), money that arrives later never changes the
payment's status or its order's: anyone can send dust or a stray token to a public address. It is recorded
(`Credit.after_settlement`) and due for refund; only a reorg that takes the settling money away re-opens it.
A reorg deeper than the confirmations that changes money already final never moves the order back to
awaiting payment by itself (access may be given already): the order goes to needs_review, or keeps its
status with an event row where it is being prepared or active (payment_settle_after_deep_reorg).
"""

from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from core.log_context import log_context
from orders.outbox import email_enqueue
from orders.payment_outcome import OrderPaymentOutcome, order_lots_gone, order_payment_outcome
from payments.extension_money import extension_money_came_late, money_arrived_at
from payments.lifecycle import payment_note, payment_transition
from payments.models import Credit, CreditKind, PaymentRequest, PaymentStatus
from payments.refunds import refunds_follow
from payments.refunds_due import AFTER_SETTLEMENT, FINAL, STRAY, UNNEEDED, refunds_due_compute, refunds_due_json

log = logging.getLogger(__name__)
P = PaymentStatus

# What the order is told for each status the credits call for; orders.payment_outcome.ORDER_PAYMENT_OUTCOMES says what
# each outcome does to the order. Rejected is a reviewer's, who tells the order directly (payments/review.py).
OUTCOME: dict[str, str] = {
    P.PENDING: OrderPaymentOutcome.UNPAID,
    P.DETECTED: OrderPaymentOutcome.HOLD,
    P.CONFIRMED: OrderPaymentOutcome.PAID,
    P.OVERPAID: OrderPaymentOutcome.PAID,
    P.UNDERPAID: OrderPaymentOutcome.NEEDS_REVIEW,
    P.LATE: OrderPaymentOutcome.NEEDS_REVIEW,
    P.WRONG_NETWORK: OrderPaymentOutcome.NEEDS_REVIEW,
}
# Emails to the customer when the payment enters these statuses.
EMAIL_FOR: dict[str, str] = {
    P.DETECTED: "payment_detected",
    P.CONFIRMED: "payment_confirmed",
    P.OVERPAID: "payment_confirmed",
    P.UNDERPAID: "payment_attention",
    P.LATE: "payment_attention",
    P.WRONG_NETWORK: "payment_attention",
}
REASONS: dict[str, str] = {
    P.PENDING: "no counted transfer any more",
    P.DETECTED: "transfer seen, waiting for confirmations",
    P.CONFIRMED: "paid in full and final",
    P.OVERPAID: "paid more than quoted and final; the excess awaits a refund decision",
    P.UNDERPAID: "paid less than quoted; a top-up to the same address completes it",
    P.LATE: "a transfer arrived after the deadline",
    P.WRONG_NETWORK: "a transfer arrived on another network or in another token",
}


def payment_status_for(payment: PaymentRequest, credits: list[Credit]) -> tuple[str, int, int]:
    """(status, received base units, confirmations of the least confirmed matching credit)."""
    counted = [credit for credit in credits if credit.counted]
    matching = [credit for credit in counted if credit.kind == CreditKind.MATCH]
    received = sum(int(credit.amount_base_units) for credit in matching)
    final = sum(int(credit.amount_base_units) for credit in matching if credit.final)
    confirmations = min((credit.confirmations for credit in matching), default=0)
    amount = int(payment.amount_base_units)
    kinds = {credit.kind for credit in counted}
    status = _status_in_the_asset_asked_for(kinds, received=received, final=final, amount=amount, matching=matching)
    # Money in another asset or network is an item apart (recorded, shown to reviewers, due back): it calls for a
    # reviewer only when the asset asked for does not pay in full. A stranger's 1 unit of a self-made token sent
    # to a public address must not hold up a full payment.
    pays_in_full = status in SETTLED or (status == P.DETECTED and received >= amount)
    if kinds & FOREIGN_KINDS and not pays_in_full:
        return P.WRONG_NETWORK, received, confirmations
    if status == P.PENDING:
        return P.PENDING, 0, 0
    return status, received, confirmations


FOREIGN_KINDS = {CreditKind.WRONG_NETWORK, CreditKind.WRONG_ASSET}


def _status_in_the_asset_asked_for(
    kinds: set[str], *, received: int, final: int, amount: int, matching: list[Credit]
) -> str:
    if CreditKind.LATE in kinds:
        return P.LATE
    if final >= amount:
        return P.CONFIRMED if final == amount else P.OVERPAID
    if received == 0:
        return P.PENDING
    if received >= amount or any(not credit.final for credit in matching):
        return P.DETECTED
    return P.UNDERPAID


def _reason(status: str, credits: list[Credit]) -> str:
    """The policy's reason, and the reorg behind it when a transfer was taken away."""
    removed = sorted(((c.removed_at, c) for c in credits if c.removed_at is not None), key=lambda pair: pair[0])
    if removed and status in (P.PENDING, P.DETECTED, P.UNDERPAID):
        return f"{REASONS[status]} ({removed[-1][1].removed_reason})"
    return REASONS[status]


SETTLED = (P.CONFIRMED, P.OVERPAID)
FIGURES = ["received_base_units", "confirmations", "refunds_due", "settled_at"]


def _outcome(payment: PaymentRequest, status: str) -> str:
    """Only the full amount of the right asset, seen, holds the lots past the window: a part of it (or dust)
    keeps the window's end, as an order with nothing seen does."""
    if status == P.DETECTED and int(payment.received_base_units) < int(payment.amount_base_units):
        return OrderPaymentOutcome.UNPAID
    return OUTCOME[status]


def _figures_from_credits(payment: PaymentRequest, credits: list[Credit], now: dt.datetime) -> str:
    """The status the credits call for, with the payment's figures set (not saved). The caller holds the lock.

    A payment that stops being settled (a reorg took its money) counts again what arrived after settlement."""
    status, received, confirmations = payment_status_for(payment, credits)
    reviewed = payment.reviewed_at is not None
    if payment.settled_at is not None and status not in SETTLED and not reviewed:
        if any(credit.after_settlement for credit in credits):
            payment.credits.filter(after_settlement=True).update(after_settlement=False)
            for credit in credits:
                credit.after_settlement = False
            status, received, confirmations = payment_status_for(payment, credits)
        payment.settled_at = None
    elif payment.settled_at is None and (status in SETTLED or reviewed):
        payment.settled_at = now
    payment.received_base_units = received
    payment.confirmations = confirmations
    if payment.refund_decided_at is None:  # until a reviewer decides, what is due back follows the chain
        scope = _due_scope(payment, status, now)
        payment.refunds_due = refunds_due_json(refunds_due_compute(payment=payment, credits=credits, scope=scope))
    return status


def _due_scope(payment: PaymentRequest, status: str, now: dt.datetime) -> str:
    """Which money is surely not the order's, before anyone decides. Settled: the excess (or, once a reviewer
    accepted, what came after). Unsettled: money in another asset or network; and all of it when it came late
    for an order whose lots are gone, since no reviewer could serve that order now."""
    if payment.reviewed_at is None and extension_money_came_late(extension_id=payment.extension_id, now=now):
        return FINAL  # an extension paid after its rental ended: nothing it could buy
    if payment.settled_at is not None:
        return AFTER_SETTLEMENT if payment.reviewed_at is not None else UNNEEDED
    if status == P.LATE and payment.reviewed_at is None and order_lots_gone(order_id=payment.order_id, now=now):
        return FINAL
    return STRAY


def _review_lapse_if_money_gone(payment: PaymentRequest, credits: list[Credit]) -> None:
    """What a reviewer accepted was taken away by a reorg: the decision no longer holds."""
    if payment.reviewed_at is not None and payment.status == P.CONFIRMED and not any(c.counted for c in credits):
        payment.reviewed_at, payment.reviewed_by = None, ""
        payment.save(update_fields=["reviewed_at", "reviewed_by"])


def payment_settle(*, payment_id: int, now: dt.datetime | None = None) -> str | None:
    """Recompute a payment from its credits and tell the order. Idempotent: run it as often as you like."""
    reference = PaymentRequest.objects.filter(pk=payment_id).values_list("order__reference", flat=True).first()
    with log_context(order=reference):
        return _payment_settle(payment_id=payment_id, now=now or timezone.now())


def _payment_settle(*, payment_id: int, now: dt.datetime) -> str | None:
    with transaction.atomic():
        payment: PaymentRequest | None = PaymentRequest.objects.select_for_update().filter(pk=payment_id).first()
        if payment is None:
            return None
        credits = list(payment.credits.select_related("network", "asset"))
        _review_lapse_if_money_gone(payment, credits)
        status = _figures_from_credits(payment, credits, now)
        payment.save(update_fields=FIGURES)
        if payment.reviewed_at is not None or status == payment.status:
            refunds_follow(payment=payment, now=now)
            return payment.status  # a reviewer's decision stands (the figures are refreshed), or nothing moved
        reason = _reason(status, credits)
        payment_transition(payment=payment, to=status, actor="system", reason=reason, now=now)
        order_payment_outcome(
            order_id=payment.order_id,
            outcome=_outcome(payment, status),
            reason=f"payment {status}: {reason}",
            now=now,
            extension_id=payment.extension_id,
            money_arrived_at=money_arrived_at(extension_id=payment.extension_id),
        )
        if status in EMAIL_FOR:
            email_enqueue(order_id=payment.order_id, name=EMAIL_FOR[status], params={"payment_id": payment.pk})
        refunds_follow(payment=payment, now=now)  # after the status email: the customer reads them in that order
    log.info("payment %s of order %s: %s", payment.pk, payment.order_id, status)
    return status


def payments_out_of_step(*, now: dt.datetime, limit: int = 500) -> list[int]:
    """Watched payments whose stored status or amount disagrees with their credits: a settlement that failed
    (a database error once a credit had become final) is done again by the next periodic pass. Two queries,
    whatever the number of payments; a reviewer's decision stands, so only their amounts are compared."""
    # EXISTS rather than a join made distinct: the window's payments by their index, never every credit
    credited = Credit.objects.filter(payment=OuterRef("pk"))
    with_credits = (
        PaymentRequest.objects.filter(watch_until__gte=now)
        .filter(Exists(credited))
        .exclude(status=P.REJECTED)
        .prefetch_related("credits")
    )
    stale = []
    for payment in with_credits:
        status, received, _confirmations = payment_status_for(payment, list(payment.credits.all()))
        expected = payment.status if payment.reviewed_at is not None else status
        if (expected, received) != (payment.status, int(payment.received_base_units)):
            stale.append(payment.pk)
            if len(stale) >= limit:
                break
    return stale


def payment_settle_after_deep_reorg(*, payment_id: int, reason: str, now: dt.datetime | None = None) -> str | None:
    """A reorg deeper than the confirmation depth changed money that counted as final. Recompute the figures,
    write the reason as an event row, and hand the order to a reviewer instead of un-paying it."""
    now = now or timezone.now()
    with transaction.atomic():
        payment = PaymentRequest.objects.select_for_update().filter(pk=payment_id).first()
        if payment is None:
            return None
        if payment.status != P.REJECTED:
            # What a reviewer may have accepted is no longer what the chain shows.
            payment.reviewed_at, payment.reviewed_by = None, ""
            payment.save(update_fields=["reviewed_at", "reviewed_by"])
        status = _figures_from_credits(payment, list(payment.credits.select_related("network", "asset")), now)
        if payment.status == P.REJECTED:
            status = P.REJECTED  # refused already: the figures change, the decision stands
        payment.save(update_fields=FIGURES)
        why = f"{reason}; a reviewer decides"
        if not payment_transition(payment=payment, to=status, actor="system", reason=why, now=now):
            payment_note(payment=payment, actor="system", reason=why, now=now)  # the status stays: a note says why
        if status != P.REJECTED:
            order_payment_outcome(
                order_id=payment.order_id,
                outcome=OrderPaymentOutcome.NEEDS_REVIEW,
                reason=f"payment {status}: {reason}",
                now=now,
                note_if_unmoved=True,
                extension_id=payment.extension_id,
            )
    log.error("payment %s of order %s: %s", payment.pk, payment.order_id, reason)
    return status

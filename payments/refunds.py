"""Refunds: their status table, their one writer, and where they come from.

A refund is opened by the money itself (payments.settle and payments.review keep `refunds_due` per asset, and
`refunds_follow` turns it into Refund rows: an overpaid excess, a late payment, a rejected or cancelled order,
money in the wrong asset) or by a reviewer (`goodwill`). The customer gives the address; a reviewer approves
or rejects; the treasurer's signer sends it; the scan confirms it on-chain.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from core.input_errors import OrderInputError
from core.transition_event import TransitionNotAllowed, status_move
from orders.models import OrderStatus
from orders.outbox import email_enqueue
from payments.extension_money import extension_money_came_late
from payments.fields import format_units
from payments.lifecycle import payment_note
from payments.models import (
    Asset,
    CreditKind,
    PaymentRequest,
    PaymentStatus,
    Refund,
    RefundEvent,
    RefundReason,
    RefundStatus,
)
from payments.quotes import QuoteError, usd_rate
from payments.refund_address import refund_address_check
from payments.refunds_due import (
    ALL,
    RefundDue,
    refunds_due_compute,
    refunds_due_json,
    refunds_due_read,
    refunds_due_text,
)

R = RefundStatus

# Allowed next statuses. An open refund (awaiting its address, or a reviewer) follows the chain and may be
# rejected; an approved one is owed and waits for the treasurer; a sent one is confirmed by the scan, or goes
# back to approved if a reorg takes its transfer away. Confirmed and rejected are final.
REFUND_TRANSITIONS: dict[str, frozenset[str]] = {
    R.AWAITING_ADDRESS: frozenset({R.PENDING_APPROVAL, R.REJECTED}),
    R.PENDING_APPROVAL: frozenset({R.AWAITING_ADDRESS, R.APPROVED, R.REJECTED}),
    R.APPROVED: frozenset({R.SENT, R.CONFIRMED, R.REJECTED}),
    R.SENT: frozenset({R.APPROVED, R.CONFIRMED}),
    R.CONFIRMED: frozenset(),
    R.REJECTED: frozenset(),
}


def refund_transition(*, refund: Refund, to: str, actor: str, reason: str, now: dt.datetime | None = None) -> bool:
    """Validate against the table, save the status alone, record who/when/from/to/why; True if it moved.
    A non-change is a no-op. The caller holds the refund's (or its payment's) row lock. Its first move to `sent`
    (or straight to `confirmed`, which the table allows) stamps `sent_at`, the ledger's time for it, in the same
    save: every sent refund has one (a constraint says so)."""
    now = now or timezone.now()
    first_sent = to in (RefundStatus.SENT, RefundStatus.CONFIRMED) and refund.sent_at is None
    return status_move(
        row=refund,
        to=to,
        table=REFUND_TRANSITIONS,
        event_model=RefundEvent,
        link="refund",
        actor=actor,
        reason=reason,
        now=now,
        also={"sent_at": now} if first_sent else None,
    )


def _reason(payment: PaymentRequest, entry: RefundDue) -> str:
    """Why one entry of `refunds_due` goes back: the payment's own asset (an excess, or late money), another
    asset or network, or everything of an order that will not be served."""
    credits = [
        credit for credit in payment.credits.on_chain() if (credit.chain_id, credit.token_contract or "") == entry.key
    ]
    if any(credit.kind in (CreditKind.WRONG_ASSET, CreditKind.WRONG_NETWORK) for credit in credits):
        return RefundReason.WRONG_ASSET
    if any(credit.kind == CreditKind.LATE for credit in credits):
        return RefundReason.LATE
    if payment.extension_id is not None and extension_money_came_late(
        extension_id=payment.extension_id, now=timezone.now()
    ):
        return RefundReason.LATE  # an extension paid after its rental ended
    if payment.status == PaymentStatus.REJECTED or payment.order.status == OrderStatus.CANCELLED:
        return RefundReason.CANCELLED
    return RefundReason.OVERPAID


def refunds_follow(*, payment: PaymentRequest, now: dt.datetime, reason: str = "") -> list[Refund]:
    """Make the payment's refunds match what is due back (`payment.refunds_due`), per asset. What a reviewer
    approved stays owed; the open rest follows the chain (opened, resized, or rejected when nothing is due
    any more). The caller holds the payment's lock. Returns the refunds opened now."""
    decided = payment.refund_decided_at is not None
    due = {
        entry.key: entry
        for entry in refunds_due_read(payment.refunds_due)
        if decided or _worth_refunding(payment, entry)
    }
    opened = []
    rows = list(payment.refunds.exclude(reason=RefundReason.GOODWILL))
    keys = set(due) | {(row.chain_id, row.token_contract) for row in rows}
    for key in keys:
        same = [row for row in rows if (row.chain_id, row.token_contract) == key]
        owed = sum(int(row.amount_base_units) for row in same if row.status in (R.APPROVED, R.SENT, R.CONFIRMED))
        want = due[key].base_units - owed if key in due else 0
        open_row = next((row for row in same if row.status in (R.AWAITING_ADDRESS, R.PENDING_APPROVAL)), None)
        if want > 0:  # what is due is never promised twice (a goodwill refund), nor once it has left the address
            want = min(want, refund_room(payment=payment, chain_id=key[0], contract=key[1], besides=open_row))
        if open_row is not None and want <= 0:
            refund_transition(refund=open_row, to=R.REJECTED, actor="system", reason="nothing is due back any more")
        elif open_row is not None and want != int(open_row.amount_base_units):
            Refund.objects.filter(pk=open_row.pk).update(amount_base_units=want)
        elif open_row is None and want > 0:
            opened.append(_refund_open(payment=payment, entry=due[key], amount=want, now=now, reason=reason))
    return opened


def refunds_open_all(*, payment: PaymentRequest, actor: str, reason: str, now: dt.datetime) -> str:
    """Everything that arrived goes back (the order was cancelled after money came): decided now, like a
    reviewer's rejection, so what is due no longer follows the chain. What already left the address is not
    promised again (`refund_room`). The caller holds the payment's lock. Returns what could not be promised,
    in words for staff (`refunds_short`); empty when all of it was."""
    credits = list(payment.credits.on_chain().select_related("network", "asset"))
    if not credits:
        return ""
    payment.refunds_due = refunds_due_json(refunds_due_compute(payment=payment, credits=credits, scope=ALL))
    payment.refund_decided_at = now
    payment.save(update_fields=["refunds_due", "refund_decided_at"])
    refunds_follow(payment=payment, now=now, reason=reason)
    short = refunds_short(payment=payment)
    note = f"refund of everything: {reason}" + (f"; {short}" if short else "")
    payment_note(payment=payment, actor=actor, reason=note, now=now)
    return short


def refunds_short(*, payment: PaymentRequest) -> str:
    """What is due back but promised by no refund, because it has already left the deposit address (a sweep
    to the treasury, an unexpected outflow), in words for staff; empty when every unit is promised. A goodwill
    refund counts as promised: it goes to the same customer. The caller holds the payment's lock."""
    missing = []
    for entry in refunds_due_read(payment.refunds_due):
        same = {"chain_id": entry.chain_id, "token_contract__iexact": entry.contract or ""}
        promised = _total(payment.refunds.exclude(status=R.REJECTED).filter(**same))
        if entry.base_units > promised:
            missing.append(dataclasses.replace(entry, base_units=entry.base_units - promised))
    if not missing:
        return ""
    return (
        f"{refunds_due_text(missing)} not promised back: it has already left the deposit address (swept to the"
        " treasury, or an unexpected outflow); pay it back from the treasury by hand"
    )


def _entry_asset(entry: RefundDue) -> Asset | None:
    """The shop's asset of one `refunds_due` entry (its chain and contract); None for a token it does not sell."""
    assets = Asset.objects.select_related("network").filter(network__chain_id=entry.chain_id)
    contract = entry.contract
    return (assets.filter(contract__iexact=contract) if contract else assets.filter(contract__isnull=True)).first()


def _worth_refunding(payment: PaymentRequest, entry: RefundDue) -> bool:
    """Opened by the money alone only for an asset the shop sells, worth REFUND_MIN_USD or more: anyone can send
    dust, or a token of their own making, to a public address; a reviewer opens those when they are real."""
    asset = _entry_asset(entry)
    if asset is None:
        return False
    whole = Decimal(entry.base_units).scaleb(-asset.decimals)
    if asset.pk == payment.asset_id:
        rate = payment.usd_rate
    else:
        try:
            rate = usd_rate(asset).usd_per_unit
        except QuoteError:
            return True  # a coin or token the shop sells, without a price now: a reviewer sees it
    return whole * rate >= settings.REFUND_MIN_USD


def _refund_open(*, payment: PaymentRequest, entry: RefundDue, amount: int, now: dt.datetime, reason: str) -> Refund:
    asset = _entry_asset(entry)
    network = asset.network if asset else payment.asset.network
    refund = Refund.objects.create(
        payment=payment,
        reason=_reason(payment, entry),
        network=network,
        chain_id=entry.chain_id,
        token_contract=entry.contract or "",
        asset=asset,
        symbol=entry.asset or "",
        decimals=entry.decimals,
        amount_base_units=amount,
        created_at=now,
    )
    RefundEvent.objects.create(
        refund=refund, created_at=now, to_status=R.AWAITING_ADDRESS, actor="system", reason=reason or "due back"
    )
    email_enqueue(order_id=payment.order_id, name="refund_opened", params={"refund_id": refund.pk})
    return refund


def refund_goodwill_open(*, payment_id: int, amount_base_units: int, reviewer: str, reason: str) -> Refund:
    """A reviewer gives money back for any other reason, in the payment's own asset."""
    if not reason.strip():
        raise ValueError("A reason is required for a goodwill refund.")
    if amount_base_units <= 0:
        raise ValueError("A refund is of a positive amount.")
    now = timezone.now()
    with transaction.atomic():
        payment = PaymentRequest.objects.select_for_update().select_related("asset__network").get(pk=payment_id)
        asset = payment.asset
        refusal = refund_goodwill_refusal(payment=payment, amount_base_units=amount_base_units)
        if refusal:
            raise ValueError(refusal)
        refund = Refund.objects.create(
            payment=payment,
            reason=RefundReason.GOODWILL,
            network=asset.network,
            chain_id=payment.chain_id,
            token_contract=payment.contract or "",
            asset=asset,
            symbol=asset.symbol,
            decimals=payment.decimals,
            amount_base_units=amount_base_units,
            created_at=now,
            decided_by=reviewer,
        )
        RefundEvent.objects.create(
            refund=refund, created_at=now, to_status=R.AWAITING_ADDRESS, actor=f"reviewer {reviewer}", reason=reason
        )
        email_enqueue(order_id=payment.order_id, name="refund_opened", params={"refund_id": refund.pk})
    return refund


def refund_goodwill_refusal(*, payment: PaymentRequest, amount_base_units: int) -> str:
    """Why a goodwill refund of this amount cannot be promised, in words for the reviewer; empty when it can.
    Without the payment's lock it is a preview (the admin's form); refund_goodwill_open asks again under it."""
    left = refund_room(payment=payment, chain_id=payment.chain_id, contract=payment.contract or "")
    if amount_base_units <= left:
        return ""
    return (
        f"A goodwill refund is at most {format_units(max(left, 0), payment.decimals)} {payment.asset.symbol}: what"
        " arrived in it, less what is already promised back or has left the address."
    )


def refund_room(*, payment: PaymentRequest, chain_id: int, contract: str, besides: Refund | None = None) -> int:
    """What can still be promised back in one asset of a payment (chain id and token contract, empty for the
    coin): what arrived in it (the shop's gas top-ups and a reorg's removed transfers aside), less every refund
    not rejected (open, approved, sent or confirmed: promised or paid), the sweeps to the treasury and the
    unexpected outflows. `besides`: an open refund being resized, not counted against itself.

    Every path that opens or grows a refund (goodwill, `refunds_follow`) asks this holding the payment's row
    lock, so two promises never count the same money, whatever order they come in."""
    same = {"chain_id": chain_id, "token_contract__iexact": contract or ""}
    arrived = payment.credits.on_chain().exclude(kind=CreditKind.GAS).filter(**same)
    refunds = payment.refunds.exclude(status=R.REJECTED).filter(**same)
    if besides is not None:
        refunds = refunds.exclude(pk=besides.pk)
    gone = (
        refunds,
        payment.sweeps.filter(removed_at__isnull=True, **same),
        payment.unexpected_outflows.filter(**same),
    )
    return _total(arrived) - sum(_total(rows) for rows in gone)


def _total(rows: QuerySet[Any]) -> int:
    """The sum of a queryset's amounts, exact: summed in Python, never as a float."""
    return sum(int(amount) for amount in rows.values_list("amount_base_units", flat=True))


class RefundDecisionError(Exception):
    """A decision the refund's status does not allow, in words for the reviewer."""


class RefundAddressChanged(RefundDecisionError):
    """The address the reviewer saw is no longer the refund's: the link holder changed it since."""


def refund_decide(
    *, refund_id: int, approve: bool, reviewer: str, reason: str, to_address: str | None = None
) -> Refund:
    """A payment reviewer approves a refund that has its address, or rejects an open or approved one.

    An approval names the address the reviewer saw (`to_address`): the customer can change it until then, so
    an address changed after the reviewer loaded the refund is not approved (RefundAddressChanged)."""
    if not reason.strip():
        raise RefundDecisionError("A reason is required for every decision.")
    with transaction.atomic():
        # The customer's address change takes this lock too (refund_address_give): seen and approved are one.
        refund: Refund = Refund.objects.select_for_update().get(pk=refund_id)
        to = R.APPROVED if approve else R.REJECTED
        if approve and refund.status != R.PENDING_APPROVAL:
            raise RefundDecisionError(f"Only a refund waiting for approval can be approved; it is {refund.status}.")
        seen = (to_address or "").strip()  # the address the reviewer saw (an approval's)
        if approve and not seen:
            raise RefundDecisionError("An approval names the address it approves (the one you saw).")
        if approve and refund.to_address.lower() != seen.lower():
            raise RefundAddressChanged(
                f"The refund's address changed to {refund.to_address} after you saw {seen}: look at"
                " it again before approving."
            )
        try:
            refund_transition(refund=refund, to=to, actor=f"reviewer {reviewer}", reason=reason)
        except TransitionNotAllowed:
            raise RefundDecisionError(f"A refund that is {refund.status} cannot be rejected any more.") from None
        Refund.objects.filter(pk=refund.pk).update(decided_by=reviewer)
    return refund


def refund_address_give(*, order_id: int, refund_id: int, address: str) -> Refund:
    """The customer's refund address, checked (payments.refund_address) before any lock is taken; the refund
    then waits for a reviewer. It can change until a reviewer approves it. Raises Refund.DoesNotExist for a
    refund of another order, OrderInputError for a bad address or a refund past that point."""
    refund: Refund = Refund.objects.select_related("network").get(pk=refund_id, payment__order_id=order_id)
    if refund.status not in CHANGEABLE:
        raise _address_fixed(refund)
    checked = refund_address_check(address, network=refund.network)  # on-chain: outside the transaction
    with transaction.atomic():
        refund = Refund.objects.select_for_update().get(pk=refund_id)
        if refund.status not in CHANGEABLE:
            raise _address_fixed(refund)
        refund.to_address = checked
        refund.save(update_fields=["to_address"])
        moved = refund_transition(refund=refund, to=R.PENDING_APPROVAL, actor="customer", reason=f"address {checked}")
        if not moved:  # a new address for a refund already waiting: the reviewer sees it in its history
            RefundEvent.objects.create(
                refund=refund,
                from_status=refund.status,
                to_status=refund.status,
                actor="customer",
                reason=f"address changed to {checked}",
            )
    return refund


CHANGEABLE = (R.AWAITING_ADDRESS, R.PENDING_APPROVAL)


def _address_fixed(refund: Refund) -> OrderInputError:
    return OrderInputError(
        "address",
        _("This refund's address can no longer change (%(status)s).") % {"status": refund.get_status_display()},
    )

"""Time credited or adjusted on a rental (orders.rental_credits) reaches everything that follows its end, as an
extension does: the live grants end with the rental and their reminders are planned again (in the credit's own
transaction), then a job moves the key backstop on the nodes and signs a manifest revision per credit.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from orders.models import Order, RentalCredit
from provisioning.access import access_backstop_on_nodes
from provisioning.manifest import manifest_change
from provisioning.models import AccessGrant

log = logging.getLogger(__name__)


def access_follow_end(sender: object, *, order: Order, ends_at: dt.datetime, credit: RentalCredit, **_: object) -> None:
    """orders.rental_credits.rental_end_moved, inside the credit's transaction: the grants' end moves now (the
    revocation sweep reads it), the reminders start again from it, and the nodes follow through the job outbox.
    A data window opened meanwhile closes: the rental goes on (the access tool's `grant` gives the login back)."""
    AccessGrant.objects.live().filter(order=order).update(ends_at=ends_at, reminders_sent=[], grace_until=None)
    job_enqueue(JobKind.ACCESS_END_FOLLOW, order_id=order.pk)


def access_end_follow(*, order_id: int) -> int:
    """The order's current end on each node (the key's `expiry-time`, the account's expiry day), then one signed
    manifest revision per credit that moved the end and is not named yet. Idempotent: a second run writes the
    same end and signs nothing. Returns how many nodes carry the end."""
    order = Order.objects.filter(pk=order_id).first()
    if order is None or order.ends_at is None:
        return 0
    count = access_backstop_on_nodes(order=order)
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=order_id)
        for credit in order.credits.exclude(seconds=0).order_by("created_at", "pk"):
            manifest_change(order=order, change_id=f"credit-{credit.pk}", change=credit_change(credit))
        job_enqueue(JobKind.ACCESS_STATE, order_id=order.pk)  # the new end in `b200 status`
    log.info("order %s: the end %s on %s node(s)", order.reference, order.ends_at, count)
    return count


def credit_change(credit: RentalCredit) -> dict[str, object]:
    """What a manifest revision says of a credit: its kind, the seconds added (negative: removed), why, the end."""
    return {
        "kind": "time_credit",
        "credit_kind": credit.kind,
        "seconds": credit.seconds,
        "reason": credit.reason,
        "ends_at": credit.ends_at_after.isoformat() if credit.ends_at_after else None,
    }

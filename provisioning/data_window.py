"""Time to take data home: at the rental's end the tenant's processes stop and the cards are freed at once, but
the account may download its files over read-only SFTP for DATA_GRACE_HOURS; then the clean end of rental
(access_revoke) runs, from grants_due.

The order stays ACTIVE during the window: its node keeps its reservation and stays in use (not sold, counted as
taken), beat's safety net for grants of orders that ended leaves it alone, and the order ends, with the "access
ended" email, when the revoke removes its last grant, as without a window. The order page shows the window.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from orders.outbox import email_enqueue
from provisioning.access import _access_tool, access_tool_ready, orders_held_for_extension_money
from provisioning.drivers import driver_for
from provisioning.models import AccessGrant

log = logging.getLogger(__name__)
ACCESS_GRACE = JobKind.ACCESS_GRACE


def data_window_hours() -> int:
    return max(0, int(settings.DATA_GRACE_HOURS))


def data_until(ends_at: dt.datetime | None) -> dt.datetime | None:
    """When a rental ending at `ends_at` loses its files (None: no window, they go at the end)."""
    hours = data_window_hours()
    return ends_at + dt.timedelta(hours=hours) if ends_at and hours else None


def windows_due(now: dt.datetime) -> QuerySet[AccessGrant]:
    """Grants whose rental has ended and whose window is not open yet (none when DATA_GRACE_HOURS is 0), less
    the rentals whose end waits for an extension's money seen in time."""
    if not data_window_hours():
        return AccessGrant.objects.none()
    held = orders_held_for_extension_money(now=now)
    ended = AccessGrant.objects.handed_over().filter(ends_at__lte=now, grace_until__isnull=True)
    return ended.exclude(order_id__in=held)


def data_windows_open(*, now: dt.datetime) -> list[int]:
    """Open the window of each grant due: its end recorded (once: a conditional update), the node told through a
    job in the same transaction, and the customer emailed once per order. Returns the grants opened."""
    opened = []
    for grant in windows_due(now).select_related("order"):
        until = grant.ends_at + dt.timedelta(hours=data_window_hours())
        with transaction.atomic():
            if not AccessGrant.objects.filter(pk=grant.pk, grace_until__isnull=True).update(grace_until=until):
                continue  # another beat opened it meanwhile
            job_enqueue(ACCESS_GRACE, grant_id=grant.pk)
            first = not grant.order.access_grants.live().exclude(pk=grant.pk).filter(grace_until__isnull=False).exists()
            if first:
                email_enqueue(order_id=grant.order_id, name="data_window", params={"until": until.isoformat()})
        opened.append(grant.pk)
    return opened


def access_grace_on_node(*, grant_id: int) -> bool:
    """Stop the tenant on the node and limit its key to read-only SFTP until the window's end (the access tool's
    `grace`). Idempotent; a window already over is left to the revoke."""
    grant = AccessGrant.objects.handed_over().select_related("node").filter(pk=grant_id).first()
    if grant is None or grant.grace_until is None or grant.grace_until <= timezone.now():
        return False
    with driver_for(grant.node) as driver:
        access_tool_ready(driver=driver, node=grant.node)  # an older installed copy knows no `grace`
        _access_tool(
            driver, grant.node, "grace", "--account", grant.account, "--until", grant.grace_until.isoformat(),
            # SIGTERM first: a training loop that saves on it keeps its checkpoint for the window (issue 41)
            "--term-seconds", str(settings.END_GRACE_SECONDS), timeout=120 + settings.END_GRACE_SECONDS,
        )  # fmt: skip
    log.info("%s on %s: data window open until %s", grant.account, grant.node, grant.grace_until)
    return True

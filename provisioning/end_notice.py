"""The notice before the end (issue 41): END_NOTICE_MINUTES before a rental's end, its node tells the account
(`~/.b200/notice.json` and a line on its terminals, the access tool's `notice`), so that a training loop can save
its checkpoint before the SIGTERM that comes at the end (END_GRACE_SECONDS before the SIGKILL).

One notice per grant and end: the job outbox is the record (a job of this kind with the grant and the end it
announces). An end that moves (an extension, time credited) is a new end, announced again when it comes near.

A move off the node (provisioning/moves.py) is announced when it starts, with reason `move`: the files are copied
once the spare has passed its preflight (about as long as the last preparations took), and the processes there
stop at the hand-over.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from core.jobs.outbox import job_enqueue
from orders.models import OrderStatus
from provisioning.access import _access_tool, access_tool_ready
from provisioning.drivers import driver_for
from provisioning.models import OPEN_MOVES, AccessGrant, NodeMove, PreparationRun, RunStatus

log = logging.getLogger(__name__)


def notices_due(now: dt.datetime) -> list[AccessGrant]:
    """Running rentals whose end is within END_NOTICE_MINUTES and not announced yet (a data window already open
    has been announced by its end)."""
    soon = now + dt.timedelta(minutes=settings.END_NOTICE_MINUTES)
    grants = AccessGrant.objects.handed_over().filter(
        order__status=OrderStatus.ACTIVE, grace_until__isnull=True, ends_at__gt=now, ends_at__lte=soon
    )
    announced = {
        (job.args.get("grant_id"), job.args.get("ends_at"))
        for job in Job.objects.filter(kind=JobKind.ACCESS_NOTICE, args__grant_id__in=[g.pk for g in grants])
    }
    return [grant for grant in grants if (grant.pk, grant.ends_at.isoformat()) not in announced]


def notices_send(now: dt.datetime) -> int:
    """Beat: a notice job for each rental whose end comes near. Returns how many were queued."""
    due = notices_due(now)
    for grant in due:
        with transaction.atomic():
            job_enqueue(JobKind.ACCESS_NOTICE, grant_id=grant.pk, ends_at=grant.ends_at.isoformat())
    return len(due)


def typical_preparation_seconds() -> int:
    """The median of the last passed preparations, start to end (END_NOTICE_MINUTES when none was measured)."""
    runs = PreparationRun.objects.filter(status=RunStatus.PASSED, started_at__isnull=False, finished_at__isnull=False)
    spans = runs.order_by("-finished_at").values_list("started_at", "finished_at")[:20]
    took = sorted((end - start).total_seconds() for start, end in spans if start and end)
    return int(took[len(took) // 2]) if took else settings.END_NOTICE_MINUTES * 60


def move_notice_queue(*, move: NodeMove, now: dt.datetime) -> None:
    """A move has taken its spare (in its transaction): the old node's account is told when its files are copied."""
    grant = AccessGrant.objects.handed_over().filter(order=move.order, node=move.from_node).first()
    if grant is not None:
        stops = (now + dt.timedelta(seconds=typical_preparation_seconds())).replace(microsecond=0)
        job_enqueue(JobKind.ACCESS_NOTICE, grant_id=grant.pk, ends_at=stops.isoformat(), reason="move")


def _still_due(grant: AccessGrant, ends_at: str, reason: str) -> bool:
    """An end that moved since it was queued gets its own notice; a move that ended has nothing to announce."""
    if reason == "move":
        return NodeMove.objects.filter(order=grant.order_id, from_node=grant.node_id, status__in=OPEN_MOVES).exists()
    return grant.ends_at is not None and grant.ends_at.isoformat() == ends_at


def notice_on_node(*, grant_id: int, ends_at: str, reason: str = "end") -> bool:
    """Give the notice on the grant's node, if it still applies."""
    grant = AccessGrant.objects.handed_over().select_related("node").filter(pk=grant_id).first()
    if grant is None or not _still_due(grant, ends_at, reason):
        return False
    with driver_for(grant.node) as driver:
        access_tool_ready(driver=driver, node=grant.node)
        _access_tool(
            driver, grant.node, "notice", "--account", grant.account, "--ends-at", ends_at, "--reason", reason,
            "--grace-seconds", str(settings.END_GRACE_SECONDS),
        )  # fmt: skip
    log.info("%s on %s: told that its processes stop at %s (%s)", grant.account, grant.node, ends_at, reason)
    return True

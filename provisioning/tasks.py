"""Thin Celery tasks for provisioning: a run per node, revocation at the end, reminders before it, and checks of
nodes between rentals (an operator's recheck, beat's daily probe)."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.task import job_task
from orders.outbox import email_enqueue
from provisioning.access import (
    REVOKE_TIMEOUT_SECONDS,
    access_extend_on_nodes,
    access_left_live_withdraw,
    access_revoke,
    access_withdraw,
    grants_due,
    reminders_due,
)
from provisioning.auto_prepare import preparation_auto
from provisioning.b200_state import b200_state_on_nodes
from provisioning.data_window import access_grace_on_node, data_windows_open
from provisioning.drivers.base import DriverError
from provisioning.end_follow import access_end_follow
from provisioning.end_notice import notice_on_node, notices_send
from provisioning.key_replace import access_key_replace_on_nodes, preparation_key_retry
from provisioning.models import AccessGrant, PreparationRun, RunStatus
from provisioning.moves import MoveWaiting, move_execute
from provisioning.node_checks import check_execute, check_stop_over_time, probes_start
from provisioning.prepare import (
    TRANSIENT_DB_ERRORS,
    preparation_conclude,
    preparation_execute,
    preparations_resume_stuck,
    run_stop_over_time,
)
from provisioning.rented_node_health import (
    downtime_close_due,
    health_probe,
    health_probe_over_time,
    health_probes_start,
)

log = logging.getLogger(__name__)
# The preflight has its own limit on the node; the task's is a little longer, and handled.
RUN_SOFT_LIMIT = settings.PREFLIGHT_TIMEOUT_SECONDS + 120


# A task that runs the preflight on a node (a preparation run, a recheck, a probe): its time limits, and a lease
# past the hard limit (a claim still held then is a dead worker's). No attempt limit: it runs until it has an
# outcome. A database error: it starts again (the claim makes it the next attempt) until it gets through; beat's
# preparation_resume_stuck_task picks up a preparation that still falls through.
PREFLIGHT_TASK_OPTIONS: dict[str, Any] = {
    "lease_seconds": RUN_SOFT_LIMIT + 120,
    "max_attempts": None,
    "acks_late": True,
    "soft_time_limit": RUN_SOFT_LIMIT,
    "time_limit": RUN_SOFT_LIMIT + 60,
    "autoretry_for": TRANSIENT_DB_ERRORS,
    "retry_backoff": 5,
    "retry_backoff_max": 300,
    "max_retries": None,
}


@job_task(kind=JobKind.PREPARATION_RUN, **PREFLIGHT_TASK_OPTIONS)
def preparation_run_task(run_id: int) -> str | None:
    try:
        return preparation_execute(run_id=run_id)
    except SoftTimeLimitExceeded:
        run_stop_over_time(run_id=run_id)
        run = PreparationRun.objects.filter(pk=run_id).first()
        if run is not None:
            preparation_conclude(order_id=run.order_id, actor=run.requested_by)
        return RunStatus.ERROR


@shared_task(
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=10,
    # The node sweeps its filesystems for the tenant's files (REVOKE_TIMEOUT_SECONDS on the node).
    soft_time_limit=REVOKE_TIMEOUT_SECONDS + 60,
    time_limit=REVOKE_TIMEOUT_SECONDS + 120,
)
def access_revoke_task(grant_id: int) -> bool:
    return access_revoke(grant_id=grant_id)


@job_task(
    kind=JobKind.ACCESS_WITHDRAW,
    lease_seconds=REVOKE_TIMEOUT_SECONDS + 180,
    max_attempts=None,  # the node stays out of sale until the account is gone: keep trying
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=None,
    soft_time_limit=REVOKE_TIMEOUT_SECONDS + 60,
    time_limit=REVOKE_TIMEOUT_SECONDS + 120,
)
def access_withdraw_task(grant_id: int) -> bool:
    return access_withdraw(grant_id=grant_id)


@job_task(
    kind=JobKind.ACCESS_EXTEND,
    lease_seconds=600,
    max_attempts=20,  # the key backstop must follow the paid end; an operator sees a job that gives up
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=5,
)
def access_extend_task(extension_id: int) -> int:
    return access_extend_on_nodes(extension_id=extension_id)


@job_task(
    kind=JobKind.ACCESS_STATE,
    lease_seconds=600,
    max_attempts=20,  # `b200` is the researcher's help, never a condition of the rental: it gives up in the end
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=5,
)
def access_state_task(order_id: int) -> int:
    return b200_state_on_nodes(order_id=order_id)


@job_task(
    kind=JobKind.ACCESS_NOTICE,
    lease_seconds=300,
    max_attempts=10,  # a notice after the end is no notice: the end itself does not wait for it
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=15,
    retry_backoff_max=120,
    max_retries=5,
)
def access_notice_task(grant_id: int, ends_at: str, reason: str = "end") -> bool:
    return notice_on_node(grant_id=grant_id, ends_at=ends_at, reason=reason)


@shared_task(acks_late=True)
def access_notices_task() -> int:
    """Beat: the notice before the end, for each rental whose end comes within END_NOTICE_MINUTES."""
    return notices_send(timezone.now())


@job_task(
    kind=JobKind.ACCESS_END_FOLLOW,
    lease_seconds=600,
    max_attempts=20,  # the key backstop must follow the credited end; an operator sees a job that gives up
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=5,
)
def access_end_follow_task(order_id: int) -> int:
    return access_end_follow(order_id=order_id)


@job_task(
    kind=JobKind.ACCESS_KEY_REPLACE,
    lease_seconds=600,
    max_attempts=20,  # a node down for a while: the customer's old key keeps working meanwhile
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=5,
)
def access_key_replace_task(change_id: int) -> int:
    return access_key_replace_on_nodes(change_id=change_id)


@job_task(kind=JobKind.PREPARATION_KEY_RETRY, acks_late=True, autoretry_for=TRANSIENT_DB_ERRORS, max_retries=5)
def preparation_key_retry_task(order_id: int) -> bool:
    return preparation_key_retry(order_id=order_id)


@job_task(
    kind=JobKind.ACCESS_GRACE,
    lease_seconds=600,
    max_attempts=20,  # the window's end revokes the account anyway; an operator sees a job that gives up
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=5,
)
def access_grace_task(grant_id: int) -> bool:
    return access_grace_on_node(grant_id=grant_id)


@job_task(kind=JobKind.PREPARATION_AUTO, acks_late=True, autoretry_for=TRANSIENT_DB_ERRORS, max_retries=5)
def preparation_auto_task(order_id: int) -> bool:
    return preparation_auto(order_id=order_id)


@job_task(
    kind=JobKind.NODE_MOVE,
    # The spare's preflight, then the copy (MOVE_COPY_MAX_MINUTES): a lease past both. A spare or old node that
    # drops mid-step, or a run another worker holds: the job runs again and continues where the move stands.
    lease_seconds=RUN_SOFT_LIMIT + settings.MOVE_COPY_MAX_MINUTES * 60 + 600,
    max_attempts=20,
    acks_late=True,
    soft_time_limit=RUN_SOFT_LIMIT + settings.MOVE_COPY_MAX_MINUTES * 60 + 300,
    time_limit=RUN_SOFT_LIMIT + settings.MOVE_COPY_MAX_MINUTES * 60 + 420,
    autoretry_for=(DriverError, MoveWaiting, *TRANSIENT_DB_ERRORS),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=10,
)
def node_move_task(move_id: int) -> str | None:
    return move_execute(move_id=move_id)


@job_task(
    kind=JobKind.NODE_MOVE_REVOKE,
    lease_seconds=REVOKE_TIMEOUT_SECONDS + 180,
    max_attempts=None,  # an unreachable old node keeps being tried, out of sale meanwhile
    acks_late=True,
    autoretry_for=(DriverError, *TRANSIENT_DB_ERRORS),
    retry_backoff=60,
    retry_backoff_max=1800,
    max_retries=None,
    soft_time_limit=REVOKE_TIMEOUT_SECONDS + 60,
    time_limit=REVOKE_TIMEOUT_SECONDS + 120,
)
def node_move_revoke_task(grant_id: int) -> bool:
    """The old node of a moved rental: the clean end of rental (the order stays active on the spare)."""
    return access_revoke(grant_id=grant_id)


@shared_task(acks_late=True)
def preparation_resume_stuck_task() -> int:
    """Beat: restart runs whose worker died; move on orders whose runs ended; withdraw access left live."""
    now = timezone.now()
    return preparations_resume_stuck(now=now) + access_left_live_withdraw(now=now)


@shared_task(acks_late=True)
def access_revoke_due_task() -> int:
    downtime_close_due(timezone.now())  # a degraded node's downtime is credited first: it moves the end
    grants = list(grants_due(timezone.now()).values_list("pk", flat=True))
    for grant_id in grants:
        access_revoke_task.delay(grant_id)
    # Rentals that end now with DATA_GRACE_HOURS > 0: the data window opens (the revoke above comes at its close).
    return len(grants) + len(data_windows_open(now=timezone.now()))


@shared_task(acks_late=True)
def access_reminders_task() -> int:
    sent = 0
    for grant, hours in reminders_due(timezone.now()):
        # Marked with the email stored, in one transaction: a reminder is neither lost nor queued twice.
        marked = sorted(set(grant.reminders_sent) | {h for h in settings.REMINDER_HOURS if h >= hours})
        with transaction.atomic():
            AccessGrant.objects.filter(order=grant.order_id).update(reminders_sent=marked)
            email_enqueue(order_id=grant.order_id, name="access_ending", params={"hours": hours})
        sent += 1
    return sent


# The check stays open (the node out of any other check) until its outcome.
@job_task(kind=JobKind.NODE_CHECK, **PREFLIGHT_TASK_OPTIONS)
def node_check_task(check_id: int) -> bool | None:
    """One recheck or probe of a node (provisioning.node_checks); a finished one is left as it is."""
    try:
        return check_execute(check_id=check_id)
    except SoftTimeLimitExceeded:
        check_stop_over_time(check_id=check_id)
        return False


@shared_task(acks_late=True)
def node_probe_idle_task() -> int:
    """Beat, daily: a probe of each idle node (reachable with its pinned host key, no process on its cards)."""
    return len(probes_start(now=timezone.now()))


# The probe answers in seconds; a node that keeps it longer is recorded as not reachable (health_probe_over_time).
HEALTH_SOFT_LIMIT = settings.NODE_CONNECT_TIMEOUT_SECONDS + 90


@job_task(
    kind=JobKind.NODE_HEALTH,
    lease_seconds=HEALTH_SOFT_LIMIT + 60,
    max_attempts=3,  # the next beat queues a fresh probe anyway
    acks_late=True,
    autoretry_for=TRANSIENT_DB_ERRORS,
    retry_backoff=5,
    max_retries=3,
    soft_time_limit=HEALTH_SOFT_LIMIT,
    time_limit=HEALTH_SOFT_LIMIT + 30,
)
def node_health_task(node_id: int) -> bool | None:
    """One health probe of a rented node (provisioning.rented_node_health); None when it is no longer rented."""
    try:
        row = health_probe(node_id=node_id)
    except SoftTimeLimitExceeded:
        row = health_probe_over_time(node_id=node_id)
    return None if row is None else row.healthy


@shared_task(acks_late=True)
def node_health_probes_task() -> int:
    """Beat, every NODE_HEALTH_PROBE_MINUTES: one probe job per node with live access."""
    return len(health_probes_start(now=timezone.now()))

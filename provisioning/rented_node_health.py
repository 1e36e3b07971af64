"""Rented nodes are watched: a health probe of each node with live access every NODE_HEALTH_PROBE_MINUTES.

Each probe reaches the node through its driver (the pinned host key: a node that does not answer, or answers
with another key, fails), puts the node tool `health.py` into the driver's workdir and runs it with the node's
Python. The tool reads nvidia-smi, the kernel log and the folders' free space; it never loads the cards and
never opens a tenant's file (provisioning/node_tools/health.py). Its findings are one `NodeHealth` row.

A failing probe moves a rented node (`in_use`) to `degraded` and tells the operators and the customer once per
episode; more failing probes while it stays degraded only add rows. A passing probe of a degraded node credits
the episode's downtime to the rental (provisioning.downtime), moves the node back to `in_use` and tells the
customer how much time was given back. Lock order, as everywhere: the node, then the order.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import posixpath
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.urls import reverse
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from core.jobs.outbox import job_enqueue
from core.latest_rows import latest_rows
from fleet.models import Node, NodeState
from orders.models import Order
from orders.outbox import email_enqueue
from orders.staff_notices import staff_notify
from provisioning.downtime import downtime_episode_close
from provisioning.drivers import driver_for
from provisioning.drivers.base import DriverError
from provisioning.models import AccessGrant, DowntimeHold, NodeHealth
from provisioning.node_tools import source
from provisioning.states import node_transition

log = logging.getLogger(__name__)
TOOL = "health.py"
XID_LOG = "/var/lib/b200-health/xid.jsonl"  # what the node's xid_watch.py writes (node_tools/health.py reads it)
TOOL_TIMEOUT_SECONDS = 60  # the tool answers in seconds; past this the node is not healthy
WATCHED = (NodeState.IN_USE, NodeState.DEGRADED)
FAIL, WARN = "fail", "warn"


@dataclass(frozen=True)
class ProbeResult:
    reachable: bool
    findings: list[dict[str, Any]]
    kernel_cursor: str


# --- which nodes, and the fan-out ------------------------------------------------------------------------------


def watched_nodes() -> QuerySet[Node]:
    """Nodes with live, handed-over access that are rented (in use) or degraded: what the probes look at."""
    granted = AccessGrant.objects.handed_over().filter(node=OuterRef("pk"))
    return Node.objects.filter(state__in=WATCHED).filter(Exists(granted)).order_by("pk")


def health_probes_start(*, now: dt.datetime) -> list[int]:
    """Beat: one probe job per watched node; the nodes it was queued for. A node is skipped while a probe job of
    its own is still open, or when its latest probe is younger than half the interval (a beat that ran twice)."""
    recent = now - dt.timedelta(minutes=settings.NODE_HEALTH_PROBE_MINUTES / 2)
    started = []
    for node in watched_nodes():
        with transaction.atomic():
            locked = Node.objects.select_for_update().filter(pk=node.pk, state__in=WATCHED).first()
            if locked is None or NodeHealth.objects.filter(node=locked, checked_at__gt=recent).exists():
                continue
            open_jobs = Job.objects.open().filter(kind=JobKind.NODE_HEALTH, gave_up_at__isnull=True)
            if open_jobs.filter(args__node_id=locked.pk).exists():
                continue
            job_enqueue(JobKind.NODE_HEALTH, node_id=locked.pk)
        started.append(node.pk)
    return started


# --- one probe ---------------------------------------------------------------------------------------------------


def health_probe(*, node_id: int) -> NodeHealth | None:
    """Probe one watched node and record the outcome (the job's work). None when the node is no longer watched."""
    node = Node.objects.filter(pk=node_id, state__in=WATCHED).first()
    grant = AccessGrant.objects.handed_over().filter(node_id=node_id).first()
    if node is None or grant is None:
        return None
    # The kernel log is read on from where this rental's last probe stopped; the first reads from the hand-over.
    previous = NodeHealth.objects.filter(node=node, order_id=grant.order_id).first()
    started = time.monotonic()
    result = probe_on_node(node, cursor=previous.kernel_cursor if previous else "", since=grant.granted_at)
    return health_record(
        node_id=node.pk,
        order_id=grant.order_id,
        result=result,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


def tool_argv(node: Node, *, cursor: str, since: dt.datetime) -> list[str]:
    home = posixpath.join(node.accounts_root, "home") if node.accounts_root else "/home"
    argv = [node.python, TOOL, "--expect-gpus", str(node.gpu_count), "--since", f"{since.timestamp():.0f}"]
    if node.accounts_root:  # the sandbox's own: the watcher's log lies under the accounts' root there
        argv += ["--xid-log", posixpath.join(node.accounts_root, XID_LOG.lstrip("/"))]
    if cursor:
        argv += ["--kernel-cursor", cursor]
    if node.preflight_device == "cuda":  # a GPU node without nvidia-smi is broken; a development node has none
        argv.append("--require-gpus")
    for path in [home, *node.scratch_folders()]:
        argv += ["--path", path]
    return argv


def probe_on_node(node: Node, *, cursor: str, since: dt.datetime) -> ProbeResult:
    """Run the node tool through the node's driver. Unreachable (no answer, a wrong host key, a timeout): a
    failing result with reachable False."""
    try:
        with driver_for(node, connect_timeout=settings.NODE_CONNECT_TIMEOUT_SECONDS) as driver:
            reached = f"answered with its pinned host key {driver.host_key_fingerprint()}"
            driver.put_file(source(TOOL), TOOL)
            answer = driver.run(tool_argv(node, cursor=cursor, since=since), timeout=TOOL_TIMEOUT_SECONDS)
    except DriverError as exc:
        detail = f"not reachable: {type(exc).__name__}: {exc}"
        return ProbeResult(False, [{"check": "reachable", "status": FAIL, "detail": detail[:500]}], cursor)
    reachable = {"check": "reachable", "status": "pass", "detail": reached}
    try:
        report = json.loads(answer.stdout)
        findings = [_finding(item) for item in report["findings"]]
        new_cursor = str(report.get("kernel_cursor") or cursor)[:100]
    except (ValueError, KeyError, TypeError, AttributeError):
        said = " ".join(f"{answer.stdout} {answer.stderr}".split())[:300] or "no output"
        detail = f"the health tool did not answer (exit {answer.exit_code}): {said}"
        return ProbeResult(True, [reachable, {"check": "probe", "status": FAIL, "detail": detail}], cursor)
    return ProbeResult(True, [reachable, *findings], new_cursor)


def _finding(item: dict[str, Any]) -> dict[str, str]:
    """One finding as the node sent it, kept to its three short fields (the node's answer is input, not trusted)."""
    status = str(item["status"])
    return {
        "check": str(item["check"])[:40],
        "status": status if status in ("pass", FAIL, WARN, "skip") else WARN,
        "detail": str(item.get("detail", ""))[:500],
    }


def health_summary(findings: list[dict[str, Any]]) -> str:
    """What is wrong, in words: the failing findings ("" when none)."""
    return "; ".join(f"{item['check']}: {item['detail']}" for item in findings if item["status"] == FAIL)[:2000]


def health_record(*, node_id: int, order_id: int, result: ProbeResult, duration_ms: int) -> NodeHealth:
    """Store the probe and move the node for it, under the node's row lock (first in the lock order)."""
    now = timezone.now()
    summary = health_summary(result.findings)
    healthy = result.reachable and not summary
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node_id)
        row = NodeHealth.objects.create(
            node=node,
            order_id=order_id,
            checked_at=now,
            reachable=result.reachable,
            healthy=healthy,
            findings=result.findings,
            summary=summary,
            kernel_cursor=result.kernel_cursor,
            duration_ms=duration_ms,
        )
        # The rental may have ended or moved while the probe ran: only the node of the same live rental moves.
        still = AccessGrant.objects.handed_over().filter(node=node, order_id=order_id).exists()
        if still and not healthy and node.state == NodeState.IN_USE:
            _degrade(node=node, order_id=order_id, summary=summary, now=now)
        elif still and healthy and node.state == NodeState.DEGRADED:
            _recover(node=node, order_id=order_id, now=now)
    log.info("health of %s: %s %s", node.name, "healthy" if healthy else "failing", summary)
    return row


def _degrade(*, node: Node, order_id: int, summary: str, now: dt.datetime) -> None:
    node_transition(node=node, to=NodeState.DEGRADED, actor="system", reason=f"health probe: {summary}", now=now)
    reference = Order.objects.filter(pk=order_id).values_list("reference", flat=True).first()
    staff_notify(
        roles=("operator",),
        subject=f"Node {node.name} degraded (order {reference})",
        body=f"The health probe of rented node {node.name} ({node.host}) fails.\nWhy: {summary[:1000]}\n"
        "Its downtime is credited to the rental when it recovers or the rental ends.",
        link=reverse("provisioning:console"),
    )
    email_enqueue(order_id=order_id, name="node_degraded", params={"node": node.name, "summary": summary[:1000]})


def _recover(*, node: Node, order_id: int, now: dt.datetime) -> None:
    closed = downtime_episode_close(node_id=node.pk, until=now)
    node_transition(node=node, to=NodeState.IN_USE, actor="system", reason="health probe passes again", now=now)
    held = isinstance(closed, DowntimeHold)
    if isinstance(closed, DowntimeHold):
        staff_notify(
            roles=("operator",),
            subject=f"Node {node.name}: downtime to decide",
            body=f"Node {node.name} works again. Its downtime is not given back until someone decides: the cause "
            f"could be the tenant's own programs.\nWhy it failed: {closed.causes[:1000]}",
            link=reverse("provisioning:console") + "#downtime-title",
        )
    email_enqueue(
        order_id=order_id,
        name="node_recovered",
        params={"node": node.name, "credit_id": closed.pk if closed is not None and not held else None, "held": held},
    )


def health_probe_over_time(*, node_id: int) -> NodeHealth | None:
    """The probe's task hit its time limit: a failing, unreachable result (the node did not answer in time)."""
    grant = AccessGrant.objects.handed_over().filter(node_id=node_id).first()
    if grant is None:
        return None
    previous = NodeHealth.objects.filter(node_id=node_id, order_id=grant.order_id).first()
    detail = "not reachable: the probe exceeded its time limit"
    cursor = previous.kernel_cursor if previous else ""
    result = ProbeResult(False, [{"check": "reachable", "status": FAIL, "detail": detail}], cursor)
    return health_record(node_id=node_id, order_id=grant.order_id, result=result, duration_ms=0)


# --- the rental's end, pruning -----------------------------------------------------------------------------------


def downtime_close_due(now: dt.datetime) -> int:
    """Before the rental's end is acted on: a degraded node's episode is credited up to the grant's end (which
    moves the end, so the grant is no longer due until then). Idempotent: one credit per episode, so at the new end
    the rental ends. Returns how many degraded rentals were due."""
    due = list(AccessGrant.objects.handed_over().filter(ends_at__lte=now, node__state=NodeState.DEGRADED))
    for grant in due:
        downtime_episode_close(node_id=grant.node_id, until=grant.ends_at)
    return len(due)


# --- reading: the order page, the console, /metrics --------------------------------------------------------------


def latest_health(node_ids: Iterable[int]) -> dict[int, NodeHealth]:
    """Each node's latest probe, in one query."""
    newest_first = ("-checked_at", "-pk")  # the index node_health_latest
    return latest_rows(NodeHealth.objects.all(), parent="node", parent_ids=node_ids, newest_first=newest_first)


def order_nodes_health(order: Order) -> list[dict[str, Any]]:
    """What the order's page and API show of each node with live access: healthy or what is wrong, and when it
    was last checked (no probe yet: checked_at None)."""
    grants = list(AccessGrant.objects.handed_over().filter(order=order).select_related("node").order_by("node__name"))
    latest = latest_health(grant.node_id for grant in grants)
    shown = []
    for grant in grants:
        row = latest.get(grant.node_id)
        if row is not None and row.order_id not in (None, order.pk):
            row = None  # a probe of the previous rental of this node is not this order's
        findings = row.findings if row is not None else []
        shown.append(
            {
                "node": grant.node.name,
                "state": grant.node.state,
                "healthy": None if row is None else row.healthy,
                "reachable": None if row is None else row.reachable,
                "checked_at": None if row is None else row.checked_at,
                "problems": [item["detail"] for item in findings if item.get("status") == FAIL],
                "warnings": [item["detail"] for item in findings if item.get("status") == WARN],
            }
        )
    return shown


def probe_ages(now: dt.datetime) -> list[tuple[str, float]]:
    """(node name, seconds since its newest probe) for each watched node; one never probed counts from when its
    access was handed over (/metrics: a probe that stopped running shows as a growing age)."""
    nodes = list(watched_nodes())
    latest = latest_health(node.pk for node in nodes)
    granted = dict(AccessGrant.objects.handed_over().filter(node__in=nodes).values_list("node_id", "granted_at"))
    ages = []
    for node in nodes:
        since = latest[node.pk].checked_at if node.pk in latest else granted.get(node.pk, now)
        ages.append((node.name, max(0.0, (now - since).total_seconds())))
    return ages

"""Nodes between rentals: an operator's recheck of a node set aside, and beat's daily probe of idle nodes.

A **recheck** (console, API, `manage.py node_recheck`) takes a `failed` or `maintenance` node and runs on it,
through its driver, what a preparation runs but the grant (provisioning.node_steps.RECHECK_STEPS): connect
with the pinned host key, upload, the preparation's setup step, the preflight with that preparation's profile
and the node's thresholds, its report. No order: no `--order`, no account, no tenant key. A pass returns the
node to `available`; a failure leaves it (or makes it) `failed`, with the reason. The node stays out of sale
meanwhile (it never leaves failed or maintenance until the outcome).

A **probe** (beat, once a day) looks at each idle node (`available`, held by no order): reachable over SSH
with its pinned host key, and the preflight's idle-card gate (nvidia-smi lists no process on its cards and
no memory used past `idle_max_mib`; judged by the preflight's own `hardware.evaluate_idle`). A node that fails
is set aside as `failed` with the reason, so it is never sold until an operator rechecks it; one that an order
took meanwhile is left to that order's preparation (its preflight runs the same gate).

Each check is a `NodeCheck` row, written before any work and run by one job (core/jobs): at most one open
check per node (a partial unique index), so a node is never rechecked twice at once. A job delivered again
after its check finished does nothing; one whose worker died starts over as the next attempt, clearing what
the lost one left on the node. Lock order, as everywhere: nodes, then the rest.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import shlex
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from core.latest_rows import latest_rows
from fleet.models import Node, NodeState
from orders import capacity
from orders.models import Preparation
from provisioning.drivers import driver_for
from provisioning.drivers.base import CommandTimeout, Driver, DriverError
from provisioning.models import AccessGrant, CheckKind, NodeCheck, PreparationRun, RunStatus
from provisioning.node_steps import RECHECK_STEPS, NodeJob, steps_run
from provisioning.preflight import hardware
from provisioning.preflight.profile import DEFAULT_THRESHOLDS
from provisioning.prepare import TRANSIENT_DB_ERRORS
from provisioning.states import node_reason_note, nodes_transition

log = logging.getLogger(__name__)
CHECK_TASK = JobKind.NODE_CHECK
RECHECKABLE = (NodeState.FAILED, NodeState.MAINTENANCE)
# A recheck runs this preparation's setup step and profile unless told another: the whole rehearsal, sharded over
# both cards, the most any order asks of a node.
RECHECK_PREPARATION = "two-card-distributed"
NVIDIA_SMI_TIMEOUT = 60


class RecheckRefused(Exception):
    """The node cannot be rechecked now (busy, or already being checked): nothing was stored."""


class UnknownPreparation(RecheckRefused):
    """The recheck names a preparation that does not exist: nothing was stored."""


def recheck_start(*, node: Node, actor: str, preparation: str = "") -> NodeCheck:
    """Store a recheck of a failed or maintenance node and its job. RecheckRefused, in words, for a node that is
    allocated, being prepared, rented or already being checked, and for an unknown preparation."""
    slug = preparation or RECHECK_PREPARATION
    chosen = Preparation.objects.filter(slug=slug).first()
    if chosen is None:
        raise UnknownPreparation(f"no preparation {slug!r}: name one of {', '.join(_preparation_slugs())}")
    try:
        with transaction.atomic():
            locked = Node.objects.select_for_update().get(pk=node.pk)
            if locked.state not in RECHECKABLE:
                raise RecheckRefused(
                    f"node {locked.name} is {locked.get_state_display()}: only a failed node or one in maintenance "
                    "is rechecked (put an available node in maintenance first; a node being prepared or rented "
                    "is never rechecked)"
                )
            if NodeCheck.objects.filter(node=locked, finished_at__isnull=True).exists():
                raise RecheckRefused(f"node {locked.name} is already being checked: wait for its outcome")
            check = NodeCheck.objects.create(
                node=locked, kind=CheckKind.RECHECK, requested_by=actor, preparation=chosen
            )
            job_enqueue(CHECK_TASK, check_id=check.pk)
    except IntegrityError:  # another request stored one in between (the partial unique index)
        raise RecheckRefused(f"node {node.name} is already being checked: wait for its outcome") from None
    log.info("recheck %s of %s requested by %s", check.pk, node.name, actor)
    return check


def _preparation_slugs() -> list[str]:
    return list(Preparation.objects.values_list("slug", flat=True))


def idle_nodes(now: dt.datetime) -> QuerySet[Node]:
    """Available nodes that no order holds and no check is looking at: what the daily probe looks at."""
    held = capacity.live_reservations(now).filter(node=OuterRef("pk"))
    granted = AccessGrant.objects.live().filter(node=OuterRef("pk"))
    checked = NodeCheck.objects.filter(node=OuterRef("pk"), finished_at__isnull=True)
    return (
        Node.objects.filter(state=NodeState.AVAILABLE)
        .filter(~Exists(held), ~Exists(granted), ~Exists(checked))
        .order_by("pk")
    )


def probes_start(*, now: dt.datetime) -> list[NodeCheck]:
    """Beat: one probe (a row and its job) per idle node. A node that got a check meanwhile is skipped."""
    started = []
    for node in idle_nodes(now):
        try:
            with transaction.atomic():
                check = NodeCheck.objects.create(node=node, kind=CheckKind.PROBE, requested_by="system", created_at=now)
                job_enqueue(CHECK_TASK, check_id=check.pk)
        except IntegrityError:
            continue
        started.append(check)
    return started


def check_execute(*, check_id: int) -> bool | None:
    """Run the check (the job's work). Idempotent: a finished check is left as it is (None)."""
    claimed = _check_claim(check_id)
    if claimed is None:
        return None
    check, lost_workdir = claimed
    try:
        if check.kind == CheckKind.RECHECK:
            passed, reason, report = _recheck_on_node(check, lost_workdir=lost_workdir)
        else:
            passed, reason, report = _probe_node(check)
    except TRANSIENT_DB_ERRORS:
        raise  # the database, not the node: the task runs the check again as its next attempt
    except DriverError as exc:  # unreachable, a wrong host key, timed out
        passed, reason, report = False, f"{type(exc).__name__}: {exc}", None
    except Exception as exc:  # anything else is the check's failure, never a check left open
        log.exception("check %s of node %s broke", check.pk, check.node.name)
        passed, reason, report = False, f"unexpected {type(exc).__name__}: {exc}", None
    check_conclude(check=check, passed=passed, reason=reason, report=report)
    return passed


def _check_claim(check_id: int) -> tuple[NodeCheck, str] | None:
    """The open check as this attempt's, and the scratch directory a lost attempt left on the node (to clear
    before starting over); None when it finished. The job's own claim keeps a second delivery out while one runs."""
    now = timezone.now()
    with transaction.atomic():
        check = NodeCheck.objects.select_for_update().filter(pk=check_id, finished_at__isnull=True).first()
        if check is None:
            return None
        lost_workdir = check.node_workdir
        if check.attempt:
            check.log = (check.log + f"attempt {check.attempt + 1}: the previous attempt was lost; starting over\n")[
                -20_000:
            ]
        check.attempt += 1
        check.started_at, check.step, check.progress, check.node_workdir = now, "connecting", 0, ""
        check.save(update_fields=["attempt", "started_at", "step", "progress", "node_workdir", "log"])
    return NodeCheck.objects.select_related("node", "preparation").get(pk=check_id), lost_workdir


def _recheck_on_node(check: NodeCheck, *, lost_workdir: str) -> tuple[bool, str, dict[str, Any] | None]:
    """The preparation's steps but the grant, on the node through its driver (provisioning.node_steps)."""
    with driver_for(check.node, connect_timeout=settings.NODE_CONNECT_TIMEOUT_SECONDS) as driver:
        NodeCheck.objects.filter(pk=check.pk, attempt=check.attempt).update(node_workdir=driver.workdir)
        status, report, error = steps_run(NodeJob(run=check, driver=driver, lost_workdir=lost_workdir), RECHECK_STEPS)
    passed = status == RunStatus.PASSED
    return passed, ("" if passed else f"recheck: {error}"), report


def _probe_node(check: NodeCheck) -> tuple[bool, str, dict[str, Any] | None]:
    """Reachable with the pinned host key (the driver refuses any other), then the idle-card gate."""
    node = check.node
    with driver_for(node, connect_timeout=settings.NODE_CONNECT_TIMEOUT_SECONDS) as driver:
        reached = f"reached {node.name}, host key {driver.host_key_fingerprint()}"
        status, detail, metrics = idle_cards_on(driver, node)
    report = {"reachable": reached, "idle_cards": {"status": status, "detail": detail, **metrics}}
    if status == hardware.FAIL:
        return False, f"daily probe: idle_cards failed: {detail}", report
    return True, f"{reached}; idle_cards {status}: {detail}", report


def idle_cards_on(driver: Driver, node: Node) -> tuple[str, str, dict[str, Any]]:
    """The preflight's idle-card gate, judged here on nvidia-smi's answers read over the node's driver: the same
    queries and the same rule (`hardware.evaluate_idle`, `idle_max_mib` from the defaults or the node's own).
    Skipped where the preflight skips it: a cpu (development) node, a node without nvidia-smi."""
    if node.preflight_device != "cuda":
        return hardware.SKIP, "cpu node: hardware gates apply to cuda nodes", {}
    thresholds = {**DEFAULT_THRESHOLDS, **(node.thresholds or {})}
    answers = []
    for query in (f"--query-gpu={hardware.MEMORY_QUERY}", f"--query-compute-apps={hardware.APPS_QUERY}"):
        argv = [hardware.NVIDIA_SMI, query, "--format=csv,noheader,nounits"]
        try:
            result = driver.run(argv, timeout=NVIDIA_SMI_TIMEOUT)
        except CommandTimeout:
            return hardware.FAIL, f"`{shlex.join(argv)}` did not answer within {NVIDIA_SMI_TIMEOUT} s", {}
        if result.exit_code == 127:  # not installed: the preflight skips the gate too
            return hardware.SKIP, f"{hardware.NVIDIA_SMI} not found on the node's PATH", {}
        if result.exit_code != 0:
            said = " ".join(f"{result.stdout} {result.stderr}".split())[: hardware.MESSAGE_CHARS] or "no message"
            return hardware.FAIL, f"`{shlex.join(argv)}` exited {result.exit_code}: {said}", {}
        answers.append(result.stdout)
    return hardware.evaluate_idle(answers[0], answers[1], thresholds, "before")


def check_conclude(*, check: NodeCheck, passed: bool, reason: str, report: dict[str, Any] | None) -> None:
    """Record the outcome and move the node: a recheck that passed returns it to sale, one that failed leaves it
    failed with the reason; a probe that failed sets an idle node aside. Under the node locks (first in the lock
    order), and only while the node is where the check found it."""
    now = timezone.now()
    raw = json.dumps(report, sort_keys=True).encode() if report is not None else b""
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        node = Node.objects.select_for_update().get(pk=check.node_id)
        current = NodeCheck.objects.select_for_update().filter(pk=check.pk, finished_at__isnull=True).first()
        if current is None or current.attempt != check.attempt:
            return  # a later attempt took the check over: its outcome counts
        note = _node_moved(check=check, node=node, passed=passed, reason=reason, now=now)
        NodeCheck.objects.filter(pk=check.pk).update(
            finished_at=now,
            passed=passed,
            reason=(reason + (f" ({note})" if note else ""))[:5000],
            report=report,
            report_sha256=hashlib.sha256(raw).hexdigest() if raw else "",
            step="done" if passed else "stopped",
            progress=100,
        )
    log.info("%s %s of %s: %s %s", check.kind, check.pk, node.name, "passed" if passed else "failed", reason)


def _node_moved(*, check: NodeCheck, node: Node, passed: bool, reason: str, now: dt.datetime) -> str:
    """Move the node for this outcome; what was left alone, in words ("" when it moved as the outcome says)."""
    actor = check.requested_by
    if check.kind == CheckKind.RECHECK:
        if node.state not in RECHECKABLE:
            return f"the node was {node.get_state_display()} by then and was left so"
        if passed:
            nodes_transition(
                node_ids=[node.pk], to=NodeState.AVAILABLE, actor=actor, reason=f"recheck {check.pk} passed", now=now
            )
        elif node.state == NodeState.FAILED:
            node_reason_note(node=node, actor=actor, reason=reason, now=now)
        else:
            nodes_transition(node_ids=[node.pk], to=NodeState.FAILED, actor=actor, reason=reason, now=now)
        return ""
    if passed:
        return ""
    taken = (
        node.state != NodeState.AVAILABLE
        or not capacity.free_nodes(now).filter(pk=node.pk).exists()
        or AccessGrant.objects.live().filter(node=node).exists()
        or PreparationRun.objects.filter(node=node, created_at__gte=check.created_at).exists()
    )
    if taken:
        return f"not set aside: the node was {node.get_state_display()} or held by an order by then"
    nodes_transition(node_ids=[node.pk], to=NodeState.FAILED, actor="system", reason=reason, now=now)
    return ""


def check_stop_over_time(*, check_id: int) -> None:
    """The task's own time limit struck: the check fails, saying so (the node stays or goes out of sale)."""
    check = NodeCheck.objects.filter(pk=check_id, finished_at__isnull=True).first()
    if check is not None:
        reason = f"{check.kind}: exceeded its time limit and was stopped"
        check_conclude(check=check, passed=False, reason=reason, report=None)


def checks_latest(nodes: list[Node]) -> dict[int, NodeCheck]:
    """Each node's latest check (the console shows it on the node's row)."""
    ids = [node.pk for node in nodes]
    return latest_rows(NodeCheck.objects.all(), parent="node", parent_ids=ids, newest_first=("-created_at", "-pk"))

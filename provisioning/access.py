"""Access: a per-order account on each node with the customer's key, handed over, reminded, revoked.

The account is bound to the order for its whole term (never rotated away). Its key carries an
`expiry-time` one day after the planned end, a backstop: revocation at the end removes the account.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from core.transition_event import TransitionNotAllowed
from fleet.models import Node, NodeState
from orders import capacity
from orders.models import EXTENSION_OPEN_STATUSES, Extension, ExtensionStatus, Order, OrderStatus
from orders.orders import order_transition
from orders.outbox import email_enqueue
from orders.sshkeys import SshKeyError, parse_ssh_public_key
from provisioning import node_tools
from provisioning.bundle import node_bundle
from provisioning.drivers import driver_for
from provisioning.drivers.base import Driver, DriverError
from provisioning.manifest import manifest_create, manifest_revise
from provisioning.models import AccessGrant, NodeMove, PreparationRun
from provisioning.states import node_transition, nodes_transition

log = logging.getLogger(__name__)
# The AuthorizedKeysFile the nodes' sshd must have: the access tool keeps each account's key there, root's.
HELD_KEYS_FILE = "/etc/ssh/authorized_keys/%u"
S = OrderStatus
KEY_BACKSTOP = dt.timedelta(days=1)
# A credit's kind for a transfer in the asset asked for (payments.models.CreditKind.MATCH): provisioning reads
# credits through the payment's relation, and imports no payments module.
CREDIT_MATCH = "match"
KEY_REFUSED = 4  # the access tool's exit status when the key itself is refused (the caller's input)
# A revocation waits END_GRACE_SECONDS for the tenant's processes to stop on SIGTERM, then walks the node's local
# filesystems for the tenant's files: minutes on a node full of data.
REVOKE_TIMEOUT_SECONDS = 1800 + settings.END_GRACE_SECONDS
ACCESS_WITHDRAW = JobKind.ACCESS_WITHDRAW


class AccessKeyRefused(Exception):
    """The order's SSH key cannot be installed: the order's own input, never the node's fault."""


def account_name(order: Order) -> str:
    """`o-` and the reference, lower case, without dashes: B2-K4MQ-9XDA -> o-b2k4mq9xda."""
    return "o-" + re.sub(r"[^a-z0-9]", "", order.reference.lower())


def access_key_line(order: Order) -> str:
    """What goes to the node: exactly the key's type and data (the comment stays in the shop), checked
    again with today's rules (an order may be older than them)."""
    try:
        key = parse_ssh_public_key(order.ssh_public_key)
    except SshKeyError as exc:
        raise AccessKeyRefused(f"the customer's SSH key cannot be installed: {exc}") from None
    return f"{key.key_type} {key.data}\n"


def access_tool_problem(*, driver: Driver, node: Node) -> str:
    """A login that is not root runs the access tool installed on the node (sudo): what is wrong with that
    copy, if anything ("" when it is this shop's version, or when the login is root)."""
    if not node.access_tool:
        return ""
    try:
        installed = driver.get_file(node.access_tool)
    except DriverError as exc:
        return f"{node.name}: no access tool at {node.access_tool} ({exc}): install it (docs/production.md)"
    if installed != node_tools.source("access.py"):
        return (
            f"the access tool at {node.access_tool} on {node.name} is not this shop's version: install it again "
            "from provisioning/node_tools/access.py (docs/production.md)"
        )
    return ""


def access_tool_check(*, driver: Driver, node: Node) -> None:
    """Grants follow this shop's rules only: checked before any work on the node."""
    problem = access_tool_problem(driver=driver, node=node)
    if problem:
        raise DriverError(problem)


def access_tool_ready(*, driver: Driver, node: Node) -> None:
    """Before a command on a live node: the work folder exists, the tool is uploaded where the login is root, and an
    installed copy is this shop's version (DriverError otherwise: the operator installs it again)."""
    driver.put_file(b"", f"{driver.workdir}/.keep")
    if not node.access_tool:
        _ensure_tool(driver)
    access_tool_check(driver=driver, node=node)


def _access_tool(driver: Driver, node: Node, *args: str, timeout: float = 120) -> str:
    # A login that is not root: only this command runs as root (the sudo rule of docs/production.md).
    if node.access_tool:
        argv = ["sudo", "-n", node.access_tool, *args]
    else:
        argv = [node.python, f"{driver.workdir}/provisioning/node_tools/access.py", *args]
    if node.accounts_root:
        argv += ["--users-prefix", node.accounts_root]
    result = driver.run(argv, timeout=timeout)
    if result.exit_code == KEY_REFUSED:
        raise AccessKeyRefused(f"the node refused the customer's SSH key: {result.stderr.strip()[-500:]}")
    if result.exit_code != 0:
        raise DriverError(f"access tool {args[0]} failed ({result.exit_code}): {result.stderr.strip()[-500:]}")
    return result.stdout


def sshd_keys_problem(*, driver: Driver, node: Node, account: str) -> str:
    """Why the node's sshd would let a tenant add SSH keys, or does not read the key file the tool keeps (issue 39),
    or "" when it reads the root-held file alone. The tool asks `sshd -T` for the account; a development node (this
    machine, the local driver) lets no tenant log in over SSH and is not asked."""
    if node.driver != "ssh":
        return ""
    try:
        report = json.loads(_access_tool(driver, node, "sshd-check", "--account", account, timeout=60))
    except ValueError as exc:
        return f"the access tool's sshd-check answered no report ({exc})"
    if report.get("ok"):
        return ""
    return (
        f"the node's sshd lets a tenant add SSH keys: {'; '.join(report.get('problems') or ['no reason given'])}. "
        f"It must read customers' keys from {HELD_KEYS_FILE} alone (docs/production.md)"
    )


def _grant_row(*, driver: Driver, order: Order, node: Node, planned_end: dt.datetime) -> AccessGrant:
    """The order's live grant row on the node, written before its account exists on the node."""
    try:
        with transaction.atomic():
            grant, _ = AccessGrant.objects.get_or_create(
                order=order,
                node=node,
                revoked_at=None,
                defaults={
                    "account": account_name(order),
                    "host": node.host or "127.0.0.1",
                    "port": node.port,
                    "host_key_fingerprint": driver.host_key_fingerprint(),
                    "ssh_key_fingerprint": order.ssh_key_fingerprint,
                    "ends_at": planned_end,
                },
            )
    except IntegrityError:  # the node's one live grant belongs to another order
        other = AccessGrant.objects.live().filter(node=node).select_related("order").first()
        holder = f"order {other.order.reference} ({other.account})" if other else "another order"
        raise DriverError(f"{node.name} still carries the live access of {holder}: revoke it first") from None
    if grant.withdrawing_since is not None:
        raise DriverError(f"the access of {order.reference} on {node.name} is being withdrawn; retry once it is gone")
    return grant


def access_planned_end(order: Order) -> dt.datetime:
    """When a new grant of the order ends: with the rental, once its clock runs (a move's spare, issue 39); before
    the hand-over, a whole rental from now (the hand-over then sets the end it starts)."""
    if order.ends_at is not None:
        return order.ends_at
    return timezone.now() + dt.timedelta(days=order.duration_days)


def access_grant_on_node(*, driver: Driver, run: PreparationRun) -> AccessGrant:
    """Create (or find) the order's account on the run's node. Idempotent."""
    order, node = run.order, run.node
    planned_end = access_planned_end(order)
    key_line = access_key_line(order)
    access_tool_check(driver=driver, node=node)
    grant = _grant_row(driver=driver, order=order, node=node, planned_end=planned_end)
    key_file = f"{driver.workdir}/customer.pub"
    driver.put_file(key_line.encode(), key_file, mode=0o644)
    account = grant.account
    _access_tool(
        driver,
        node,
        "grant",
        "--account",
        account,
        "--key-file",
        key_file,
        "--expires",
        (planned_end + KEY_BACKSTOP).isoformat(),
    )
    return grant


def access_handover(*, order: Order, runs: list[PreparationRun], now: dt.datetime) -> None:
    """Every node passed: the rental clock starts now. Runs in preparation_conclude's transaction."""
    why = "every node passed its preflight"
    if not order_transition(order=order, to=S.ACTIVE, actor="system", reason=why, now=now):
        raise TransitionNotAllowed(f"order {order.reference} is active already: its clock started once")
    order.active_since = now
    order.ends_at = now + dt.timedelta(days=order.duration_days)
    order.save(update_fields=["active_since", "ends_at"])
    nodes = [run.node_id for run in runs]
    grants = list(order.access_grants.handed_over().filter(node__in=nodes).select_related("node"))
    AccessGrant.objects.filter(pk__in=[g.pk for g in grants]).update(ends_at=order.ends_at)
    nodes_transition(
        node_ids=nodes, to=NodeState.IN_USE, actor="system", reason=f"handed over to {order.reference}", now=now
    )
    manifest_create(order=order, runs=runs, grants=grants)
    email_enqueue(order_id=order.pk, name="access_ready")
    job_enqueue(JobKind.ACCESS_STATE, order_id=order.pk)  # `b200` and the order's facts on its nodes (issue 41)


def access_follow_extension(
    sender: object, *, extension: Extension, order: Order, ends_at: dt.datetime, **_: object
) -> None:
    """An extension applied (orders.extensions.extension_applied, inside its transaction): the order's grants end
    with the rental, the reminders are planned again from the new end (none was sent for it), and the nodes' key
    backstop follows through the job outbox (access_extend_on_nodes)."""
    # A data window open meanwhile closes: the rental goes on (the node tool's `grant` gives the whole login back).
    AccessGrant.objects.live().filter(order=order).update(ends_at=ends_at, reminders_sent=[], grace_until=None)
    job_enqueue(JobKind.ACCESS_EXTEND, extension_id=extension.pk)


def access_extend_on_nodes(*, extension_id: int) -> int:
    """An applied extension moved the rental's end: each live account's key backstop (its `expiry-time` and the
    account's expiry day) moves with it on the node, through the driver (the access tool's `grant` on an
    existing account only refreshes its expiry), and the order's manifest is signed again as a new revision
    that points to the previous one. Idempotent: it sets the order's current end, whatever ran before."""
    applied = Extension.objects.select_related("order").filter(status=ExtensionStatus.APPLIED)
    extension = applied.filter(pk=extension_id).first()
    if extension is None:
        return 0
    count = access_backstop_on_nodes(order=extension.order)
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=extension.order_id)
        manifest_revise(order=order, extension_id=extension.pk)
        job_enqueue(JobKind.ACCESS_STATE, order_id=order.pk)  # the new end in `b200 status`
    log.info("order %s: access extended to %s on %s node(s)", order.reference, order.ends_at, count)
    return count


def access_backstop_on_nodes(*, order: Order) -> int:
    """The rental's end moved (an extension, time credited or adjusted): each live account's key backstop (its
    `expiry-time` and the account's expiry day) follows the order's current end on the node, through the driver
    (the access tool's `grant` on an existing account only refreshes its expiry). Idempotent: it writes the
    current end, whatever ran before. Returns how many nodes carry it."""
    order = Order.objects.get(pk=order.pk)  # the end as it is now, not as the caller read it
    # A node a move left, keeping files read-only for the customer, never gets the whole login back.
    left = NodeMove.objects.filter(order=order, old_files_kept_at__isnull=False).values("from_node")
    grants = list(order.access_grants.handed_over().exclude(node__in=left).select_related("node"))
    key_line = access_key_line(order)
    for grant in grants:
        with driver_for(grant.node) as driver:
            access_tool_ready(driver=driver, node=grant.node)
            key_file = f"{driver.workdir}/customer.pub"
            driver.put_file(key_line.encode(), key_file, mode=0o644)
            assert order.ends_at is not None, f"order {order.reference}: access handed over, so the rental has an end"
            expires = (order.ends_at + KEY_BACKSTOP).isoformat()
            _access_tool(
                driver, grant.node, "grant", "--account", grant.account, "--key-file", key_file, "--expires", expires
            )
    return len(grants)


def _revoke_on_node(grant: AccessGrant) -> None:
    with driver_for(grant.node) as driver:
        driver.put_file(b"", f"{driver.workdir}/.keep")
        if not grant.node.access_tool:
            _ensure_tool(driver)
        elif problem := access_tool_problem(driver=driver, node=grant.node):
            # Taking access away comes first: an older copy still removes the account.
            log.warning("revoking %s with the node's own access tool: %s", grant.account, problem)
        # The tool proves the node clean (no file, process or GPU work of the account left) or exits 1 saying
        # what is left: a DriverError, so the grant stays live and the node out of sale until a retry succeeds.
        scratch = [arg for path in grant.node.scratch_folders() for arg in ("--scratch", path)]
        # SIGTERM first: a training loop that saves on it keeps its checkpoint (END_GRACE_SECONDS, issue 41)
        args = ["--account", grant.account, *scratch, "--term-seconds", str(settings.END_GRACE_SECONDS)]
        try:
            _access_tool(driver, grant.node, "revoke", *args, timeout=REVOKE_TIMEOUT_SECONDS)
        except DriverError as exc:
            log.error("%s on %s is not revoked, the node stays with its tenant: %s", grant.account, grant.node, exc)
            raise


def access_revoke(*, grant_id: int) -> bool:
    """Remove the account from its node; when the order's last grant goes, the rental has ended."""
    grant = AccessGrant.objects.handed_over().select_related("node", "order").filter(pk=grant_id).first()
    if grant is None:
        return False
    _revoke_on_node(grant)
    now = timezone.now()
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        order = Order.objects.select_for_update().get(pk=grant.order_id)
        AccessGrant.objects.filter(pk=grant.pk).update(revoked_at=now)
        # A node that was failing its health probe (or that an operator marked failed: a rental moved away from
        # it) is not sold again until an operator rechecks it.
        degraded = Node.objects.filter(pk=grant.node_id, state__in=(NodeState.DEGRADED, NodeState.FAILED)).exists()
        nodes_transition(
            node_ids=[grant.node_id],
            to=NodeState.FAILED if degraded else NodeState.AVAILABLE,
            actor="system",
            reason="rental ended on a node failing its health probe: recheck it" if degraded else "rental ended",
            now=now,
        )
        capacity.release_lots_on(order=order, node_id=grant.node_id, now=now, reason="rental ended")
        if order.status == S.ACTIVE and not order.access_grants.live().exists():
            order_transition(
                order=order, to=S.ENDED, actor="system", reason="the rental ended; access revoked", now=now
            )
            email_enqueue(order_id=order.pk, name="access_ended")
    return True


def access_withdraw_request(*, order: Order, node_ids: list[int] | None = None, now: dt.datetime) -> list[int]:
    """The preparation did not hand over (on these nodes, or at all): its live grants are withdrawn, and each
    node stays out of sale until the account is gone. Runs in the caller's transaction, under the node locks."""
    grants = order.access_grants.live()
    if node_ids is not None:
        grants = grants.filter(node__in=node_ids)
    grant_ids = list(grants.values_list("pk", flat=True))
    AccessGrant.objects.filter(pk__in=grant_ids, withdrawing_since__isnull=True).update(withdrawing_since=now)
    # A node an operator has to look at (failed, in maintenance) stays as it is.
    held = Node.objects.filter(access_grants__in=grant_ids).exclude(state__in=(NodeState.FAILED, NodeState.MAINTENANCE))
    reason = f"removing the access given to {order.reference}"
    nodes_transition(
        node_ids=list(held.values_list("pk", flat=True)), to=NodeState.REVOKING, actor="system", reason=reason, now=now
    )
    access_withdraw_enqueue(grant_ids)
    return grant_ids


def access_withdraw_enqueue(grant_ids: list[int]) -> None:
    for grant_id in grant_ids:
        job_enqueue(ACCESS_WITHDRAW, grant_id=grant_id)


def access_withdraw(*, grant_id: int) -> bool:
    """Remove from its node an account made during a preparation that did not hand over; then the node
    may be sold again (a node that failed stays failed for the operators)."""
    grant = AccessGrant.objects.withdrawing().select_related("node").filter(pk=grant_id).first()
    if grant is None:
        return False
    _revoke_on_node(grant)
    with transaction.atomic():
        capacity.lock_sellable_nodes()
        # A revoking node is out of sale, so not among the locks above: its own lock, then the state checked.
        node = Node.objects.select_for_update().get(pk=grant.node_id)
        AccessGrant.objects.live().filter(pk=grant.pk).update(revoked_at=timezone.now())
        if node.state == NodeState.REVOKING and not AccessGrant.objects.live().filter(node=node).exists():
            node_transition(node=node, to=NodeState.AVAILABLE, actor="system", reason="the withdrawn access is gone")
    return True


def access_left_live_withdraw(*, now: dt.datetime) -> int:
    """Beat's safety net: a live grant left on an order that is neither preparing nor active (made before
    withdrawals existed) is withdrawn. (A withdrawal whose task was lost is a job: beat sends it again.)"""
    left = AccessGrant.objects.handed_over().exclude(order__status__in=(S.ACTIVE, S.PREPARING))
    orders = set(left.values_list("order_id", flat=True))
    for order_id in orders:
        with transaction.atomic():
            capacity.lock_sellable_nodes()
            order = Order.objects.select_for_update().get(pk=order_id)
            if order.status not in (S.ACTIVE, S.PREPARING):
                access_withdraw_request(order=order, now=now)
    return len(orders)


def _ensure_tool(driver: Driver) -> None:
    """A revocation may run on a fresh driver workdir: ship the access tool there again."""
    driver.put_file(node_bundle(), f"{driver.workdir}/bundle.tar.gz")
    result = driver.run(["tar", "-xzf", f"{driver.workdir}/bundle.tar.gz", "-C", driver.workdir], timeout=60)
    if result.exit_code != 0:
        raise DriverError(f"unpacking the access tool failed: {result.stderr[-300:]}")


def orders_held_for_extension_money(*, now: dt.datetime) -> set[int]:
    """Active orders whose end has passed but waits: an extension was paid in full, in the asset asked for, before
    the end, and its money is not final yet (judged by arrival, its days are owed). At most
    EXTENSION_FINALITY_GRACE_MINUTES after the end; money short of the price holds nothing. Read from the order's
    side, through the extension's payment and its credits (the same rule as payments/extension_money.py)."""
    grace = dt.timedelta(minutes=settings.EXTENSION_FINALITY_GRACE_MINUTES)
    waiting = Extension.objects.filter(
        status__in=EXTENSION_OPEN_STATUSES,
        order__status=OrderStatus.ACTIVE,
        order__ends_at__lte=now,
        order__ends_at__gt=now - grace,
    ).select_related("order", "payment")
    held = set()
    for extension in waiting:
        arrived = extension.payment.credits.counted().filter(
            kind=CREDIT_MATCH, block_timestamp__lt=extension.order.ends_at
        )
        if sum(int(amount) for amount in arrived.values_list("amount_base_units", flat=True)) >= int(
            extension.payment.amount_base_units
        ):
            held.add(extension.order_id)
    return held


def grants_due(now: dt.datetime) -> QuerySet[AccessGrant]:
    """Access whose rental has ended and whose data window (provisioning/data_window.py) is over, less the rentals
    whose end waits for an extension's money seen in time. With DATA_GRACE_HOURS at 0 there is no window: the
    end itself (a window opened before the setting changed is still kept)."""
    held = orders_held_for_extension_money(now=now)
    due = AccessGrant.objects.handed_over().filter(ends_at__lte=now).exclude(order_id__in=held)
    if settings.DATA_GRACE_HOURS > 0:
        return due.filter(grace_until__lte=now)
    return due.filter(Q(grace_until__isnull=True) | Q(grace_until__lte=now))


def reminders_due(now: dt.datetime) -> list[tuple[AccessGrant, int]]:
    """(grant, hours) for each reminder whose moment has come and that was not sent yet, one per order."""
    due, seen = [], set()
    for grant in AccessGrant.objects.handed_over().filter(ends_at__gt=now).select_related("order"):
        if grant.order_id in seen:
            continue
        left = (grant.ends_at - now).total_seconds() / 3600
        pending = [hours for hours in settings.REMINDER_HOURS if left <= hours and hours not in grant.reminders_sent]
        if pending:
            due.append((grant, min(pending)))
            seen.add(grant.order_id)
    return due

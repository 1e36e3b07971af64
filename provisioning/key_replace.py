"""The customer's new SSH key reaches the nodes: installed on every node of an active rental (the old key removed,
the access tool's `rekey`), then the order takes it, its grants name it, a manifest revision is signed and the
customer is told; and a preparation stopped by a refused key starts again once the customer replaced it.

Both run as jobs the order domain asks for (orders/key_change.py) and are idempotent.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from orders.key_change import key_change_applied
from orders.models import Order, OrderStatus, SshKeyChange
from orders.outbox import email_enqueue
from orders.sshkeys import SshKeyError, parse_ssh_public_key
from provisioning.access import KEY_BACKSTOP, AccessKeyRefused, _access_tool, access_tool_ready
from provisioning.drivers import driver_for
from provisioning.manifest import manifest_change
from provisioning.models import AccessGrant, RunStatus
from provisioning.prepare import PreparationError, preparation_start

log = logging.getLogger(__name__)
S = OrderStatus


def _newest(order: Order) -> SshKeyChange | None:
    """The key the nodes must carry: the newest change that was neither superseded nor refused."""
    return order.key_changes.filter(error="").order_by("-created_at", "-pk").first()


def access_key_replace_on_nodes(*, change_id: int) -> int:
    """Install the change's key on every node of the order (each account's key replaced, same backstop), then
    apply it. A change superseded meanwhile stops, and the newest one is installed again after it (its job may
    have finished before this one wrote the nodes). Returns how many nodes carry it."""
    change = SshKeyChange.objects.select_related("order").filter(pk=change_id).first()
    if change is None or change.error or change != _newest(change.order):
        return 0
    order = change.order
    if order.status != S.ACTIVE:
        SshKeyChange.objects.filter(pk=change.pk, applied_at__isnull=True).update(
            error="the rental was no longer active when the key was to be installed"
        )
        return 0
    try:
        key = parse_ssh_public_key(change.public_key)
        _on_nodes(order=order, change=change, key_line=f"{key.key_type} {key.data}\n")
    except (SshKeyError, AccessKeyRefused) as exc:  # the key itself: no retry helps, the old key keeps working
        SshKeyChange.objects.filter(pk=change.pk, applied_at__isnull=True).update(error=str(exc)[:500])
        Order.objects.filter(pk=order.pk).update(updated_at=timezone.now())  # the page says so
        log.warning("order %s: the new SSH key was refused: %s", order.reference, exc)
        return 0
    return _apply(change_id=change.pk)


def _on_nodes(*, order: Order, change: SshKeyChange, key_line: str) -> None:
    assert order.ends_at is not None  # an active rental has its end
    expires = (order.ends_at + KEY_BACKSTOP).isoformat()  # the backstop the grant set, moved by extensions
    for grant in order.access_grants.handed_over().select_related("node"):
        with driver_for(grant.node) as driver:
            access_tool_ready(driver=driver, node=grant.node)
            key_file = f"{driver.workdir}/customer-{change.pk}.pub"
            driver.put_file(key_line.encode(), key_file, mode=0o644)
            _access_tool(
                driver, grant.node, "rekey", "--account", grant.account, "--key-file", key_file, "--expires", expires
            )


def _apply(*, change_id: int) -> int:
    now = timezone.now()
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=SshKeyChange.objects.get(pk=change_id).order_id)
        change = SshKeyChange.objects.select_related("order").get(pk=change_id)
        newest = _newest(order)
        if change.error and newest is not None:
            # A newer key came while this one was being written to the nodes: the newest is installed again.
            job_enqueue(JobKind.ACCESS_KEY_REPLACE, change_id=newest.pk)
            return 0
        grants = order.access_grants.handed_over()
        if key_change_applied(change=change, now=now):
            AccessGrant.objects.filter(pk__in=grants.values("pk")).update(ssh_key_fingerprint=change.new_fingerprint)
            manifest_change(
                order=order,
                change_id=f"key-{change.pk}",
                change={
                    "kind": "ssh_key",
                    "ssh_key_fingerprint": change.new_fingerprint,
                    "previous_fingerprint": change.old_fingerprint,
                },
            )
            email_enqueue(order_id=order.pk, name="key_replaced", params={"change_id": change.pk})
        count = grants.count()
    log.info("order %s: SSH key %s on %s node(s)", order.reference, change.new_fingerprint, count)
    return count


def preparation_key_retry(*, order_id: int) -> bool:
    """The customer replaced a key the node refused: the preparation starts again, as if they pressed the
    operators' button. A preparation that failed for a node's fault waits for the operators, as before."""
    order = Order.objects.filter(pk=order_id, status=S.PREPARATION_FAILED).first()
    if order is None or not _failed_on_the_key(order):
        return False
    try:
        preparation_start(order_id=order.pk, actor="customer")
    except PreparationError as exc:  # no node free now: the order stays failed, on the operators' console
        log.warning("order %s: the preparation could not start again after the new key: %s", order.reference, exc)
        return False
    return True


def _failed_on_the_key(order: Order) -> bool:
    latest: dict[int, str] = {}
    for node_id, status in order.preparation_runs.order_by("created_at", "pk").values_list("node_id", "status"):
        latest[node_id] = status
    return RunStatus.REFUSED in latest.values()

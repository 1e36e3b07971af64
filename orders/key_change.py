"""The customer replaces the order's SSH key (order page or API, with the order's secret token).

Before the preparation the order's key simply changes. While the rental is active the new key is recorded
(an SshKeyChange) and a job installs it on every node of the order (provisioning), which changes the order's
key once every node carries it. While the node is being prepared the key in use is the one being installed:
the change waits for the hand-over. A key the node refused at preparation, once replaced, starts the
preparation again by itself (a job: the order domain never imports provisioning).
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.input_errors import OrderInputError
from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from orders.models import Order, OrderStatus, SshKeyChange
from orders.orders import order_note
from orders.sshkeys import SshKeyError, SshPublicKey, parse_ssh_public_key

S = OrderStatus
FIELD = "ssh_public_key"
# The key only lives on the order: nothing was installed anywhere yet (or the failed run's access is withdrawn).
BEFORE_PREPARATION = (S.AWAITING_PAYMENT, S.PAYMENT_REPORTED, S.PAID, S.NEEDS_REVIEW, S.PREPARATION_FAILED)
SUPERSEDED = "replaced by a newer key before it was installed"


class KeyChangeRefused(Exception):
    """The order's state does not allow a new key now; the message says why, and what to do."""


def key_replaceable(status: str) -> bool:
    """Whether the order page offers the form."""
    return status in BEFORE_PREPARATION or status == S.ACTIVE


def key_change_pending(order: Order) -> SshKeyChange | None:
    """The change of an active rental still being installed on its nodes, if any."""
    return order.key_changes.filter(applied_at__isnull=True, error="").order_by("-created_at", "-pk").first()


def key_change_unapplied(order: Order) -> SshKeyChange | None:
    """What the order page says about the last change not installed yet: being installed, or refused."""
    last = order.key_changes.order_by("-created_at", "-pk").first()
    if last is None or last.applied_at is not None or last.error == SUPERSEDED:
        return None
    return last


def key_replace(*, order_id: int, text: str, actor: str = "customer", now: dt.datetime | None = None) -> SshKeyChange:
    """Replace the order's key with `text` (checked as the order form checks it). OrderInputError on the field for
    a bad key or the same key again; KeyChangeRefused while preparing or after the end. Nothing is stored then."""
    now = now or timezone.now()
    with transaction.atomic():
        # The order's row lock: preparation_start takes it too, so a key never changes under a starting run.
        order = Order.objects.select_for_update().get(pk=order_id)
        _refusal_raise(order.status)
        if order.status == S.ACTIVE and order.ends_at is not None and order.ends_at <= now:
            # Its end passed: the node is being cleaned, or its data window (read-only SFTP) is open.
            raise KeyChangeRefused(
                _("This rental has ended: the key in use keeps working for the download window; it is not replaced.")
            )
        key = _parsed(text)
        pending = key_change_pending(order) if order.status == S.ACTIVE else None
        if key.fingerprint in (order.ssh_key_fingerprint, pending.new_fingerprint if pending else None):
            raise OrderInputError(FIELD, _("This is already the key of this order: paste the new public key."))
        if order.status == S.ACTIVE:
            return _requested_on_nodes(order=order, key=key, actor=actor, now=now)
        return _replaced_on_order(order=order, key=key, actor=actor, now=now)


def _refusal_raise(status: str) -> None:
    if status == S.PREPARING:
        raise KeyChangeRefused(
            _(
                "Your node is being prepared with the current key: wait until access is handed over, then replace "
                "the key here."
            )
        )
    if status == S.ENDED:
        raise KeyChangeRefused(_("This rental has ended and its access is removed: there is no key to replace."))
    if not key_replaceable(status):
        raise KeyChangeRefused(_("This order is closed: its SSH key can no longer be replaced."))


def _parsed(text: str) -> SshPublicKey:
    try:
        return parse_ssh_public_key(text)
    except SshKeyError as exc:
        raise OrderInputError(FIELD, str(exc)) from None


def _replaced_on_order(*, order: Order, key: SshPublicKey, actor: str, now: dt.datetime) -> SshKeyChange:
    old = order.ssh_key_fingerprint
    change = SshKeyChange.objects.create(
        order=order,
        old_fingerprint=old,
        new_fingerprint=key.fingerprint,
        public_key=key.line,
        actor=actor,
        created_at=now,
        applied_at=now,
    )
    order.ssh_public_key, order.ssh_key_fingerprint, order.updated_at = key.line, key.fingerprint, now
    order.save(update_fields=["ssh_public_key", "ssh_key_fingerprint", "updated_at"])
    order_note(order=order, actor=actor, reason=f"SSH key replaced: {old} -> {key.fingerprint}", now=now)
    if order.status == S.PREPARATION_FAILED:
        # Provisioning restarts the preparation if it was the key that the node refused (not a node's fault).
        job_enqueue(JobKind.PREPARATION_KEY_RETRY, order_id=order.pk)
    return change


def _requested_on_nodes(*, order: Order, key: SshPublicKey, actor: str, now: dt.datetime) -> SshKeyChange:
    # A newer key wins over one not installed yet: its job finds itself superseded and stops.
    order.key_changes.filter(applied_at__isnull=True, error="").update(error=SUPERSEDED)
    change = SshKeyChange.objects.create(
        order=order,
        old_fingerprint=order.ssh_key_fingerprint,
        new_fingerprint=key.fingerprint,
        public_key=key.line,
        actor=actor,
        created_at=now,
    )
    Order.objects.filter(pk=order.pk).update(updated_at=now)  # the page shows the key being installed
    order_note(
        order=order, actor=actor, reason=f"SSH key replacement requested: {key.fingerprint}, installing on the nodes",
        now=now,
    )  # fmt: skip
    job_enqueue(JobKind.ACCESS_KEY_REPLACE, change_id=change.pk)
    return change


def key_change_applied(*, change: SshKeyChange, now: dt.datetime) -> bool:
    """Every node carries the change's key: the order takes it. The caller holds the order's row lock and
    updates its grants. False when the change was superseded or applied already (nothing written)."""
    updated = SshKeyChange.objects.filter(pk=change.pk, applied_at__isnull=True, error="").update(applied_at=now)
    if not updated:
        return False
    order = change.order
    order.ssh_public_key, order.ssh_key_fingerprint, order.updated_at = change.public_key, change.new_fingerprint, now
    order.save(update_fields=["ssh_public_key", "ssh_key_fingerprint", "updated_at"])
    reason = f"SSH key replaced on the nodes: {change.old_fingerprint} -> {change.new_fingerprint}"
    order_note(order=order, actor="system", reason=reason, now=now)
    return True

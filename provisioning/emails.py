"""The access emails' template context, for the outbox (orders/outbox.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from orders.models import Order, RentalCredit, SshKeyChange
from orders.order_links import order_key_form_path
from orders.outbox import email_context
from provisioning.data_window import data_until
from provisioning.models import AccessGrant, NodeMove
from provisioning.ssh_setup import known_hosts_line, ssh_config_block


@dataclass(frozen=True)
class AccessShown:
    """A node's access as the access emails show it: the grant's commands, and SSH that works on the first try
    (the pinned key's known_hosts line and the config block, None where no key is pinned)."""

    ssh_command: str
    sftp_command: str
    scp_command: str
    host_key_fingerprint: str
    known_hosts_line: str | None
    ssh_config: str | None

    @classmethod
    def of(cls, grant: AccessGrant) -> AccessShown:
        return cls(
            ssh_command=grant.ssh_command,
            sftp_command=grant.sftp_command,
            scp_command=grant.scp_command,
            host_key_fingerprint=grant.host_key_fingerprint,
            known_hosts_line=known_hosts_line(grant),
            ssh_config=ssh_config_block(grant),
        )


@email_context("access_ready", "access_ending")
def access_email_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    rows = list(order.access_grants.handed_over().select_related("node"))
    for grant in rows:
        grant.order = order  # read by the SSH lines, not fetched again
    grants = [AccessShown.of(grant) for grant in rows]
    # When the files go, if the rental has a window to download them after its end (provisioning/data_window.py).
    return {"grants": grants, "hours": params.get("hours"), "data_until": data_until(order.ends_at)}


@email_context("data_window")
def data_window_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    grants = list(order.access_grants.handed_over().select_related("node"))
    until = dt.datetime.fromisoformat(params["until"]) if params.get("until") else None
    return {"grants": grants, "until": until}


@email_context("preparation_started", "access_ended")
def order_only_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    return {}


@email_context("preparation_failed")
def preparation_failed_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    # A refused key is the customer's to fix: the email links to the order page's key form.
    return {
        "key_refused": bool(params.get("key_refused")),
        "key_form_url": settings.SITE_URL + order_key_form_path(order),
    }


@email_context("key_replaced")
def key_replaced_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    change = SshKeyChange.objects.get(pk=params["change_id"], order=order)
    return {"change": change, "grants": list(order.access_grants.handed_over().select_related("node"))}


@email_context("node_degraded")
def node_degraded_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    return {"node": params["node"], "summary": params["summary"], "cap_hours": settings.DOWNTIME_CREDIT_CAP_HOURS}


@email_context("node_recovered")
def node_recovered_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    credit_id = params.get("credit_id")  # None: nothing was credited (the cap was used up, or no time passed)
    credit = RentalCredit.objects.filter(pk=credit_id, order=order).first() if credit_id else None
    minutes = -(-credit.seconds // 60) if credit is not None else 0  # rounded up: 40 s given back is not "0 minutes"
    # held: the downtime waits on a person (the tenant's own programs could have caused it; provisioning.downtime)
    return {"node": params["node"], "minutes": minutes, "held": bool(params.get("held"))}


@email_context("node_moved", "node_move_waiting")
def node_move_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    # The move's copy report says what was and was not copied; the new access is the spare's grant.
    move = NodeMove.objects.select_related("from_node", "to_node").get(pk=params["move_id"], order=order)
    report = move.copy_report or {}
    handed_over = AccessGrant.objects.handed_over().filter(order=order)
    grant = None if move.to_node_id is None else handed_over.filter(node_id=move.to_node_id).first()
    old_grant = AccessGrant.objects.handed_over().filter(order=order, node_id=move.from_node_id).first()
    return {
        "move": move,
        "grant": grant,
        # The copy left files behind: they stay on the old node, read-only over SFTP (provisioning.moves).
        "kept": move.old_files_kept_at is not None and old_grant is not None,
        "old_grant": old_grant,
        "copied": report.get("copied", []),
        "not_copied": report.get("not_copied", []),
        "reachable": report.get("reachable", True),
    }

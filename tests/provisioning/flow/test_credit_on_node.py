"""Time given back reaches the node like an extension does: a rented node's downtime episode, once closed, moves
the rental's end, the grant's end, the account's key backstop on the node (over the real sandboxed sshd, read
back with the access tool's `show`) and signs a manifest revision naming the credit; a staff removal moves them
back; a second run of the job changes nothing."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from orders.models import OrderStatus, RentalCredit
from orders.rental_credits import rental_time_adjust
from provisioning import node_tools
from provisioning.downtime import downtime_episode_close
from provisioning.drivers import driver_for
from provisioning.end_follow import access_end_follow
from provisioning.manifest import manifest_verify
from provisioning.models import AccessGrant, Node, NodeEvent, NodeState
from provisioning.states import node_transition

PREPARE = "/api/v1/orders/{}/prepare/"
HOUR = dt.timedelta(hours=1)


def _shown(node: Node, account: str) -> dict:
    """The access tool's `show` of the account, run on the node as an operator would."""
    with driver_for(node) as driver:
        driver.put_file(node_tools.source("access.py"), "access.py", mode=0o700)
        argv = [node.python, f"{driver.workdir}/access.py", "show", "--account", account]
        result = driver.run([*argv, "--users-prefix", node.accounts_root], timeout=60)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _key_expiry(node: Node, account: str) -> str:
    (key,) = _shown(node, account)["authorized_keys"]
    return key["expiry_time"]


def _backstop(end: dt.datetime) -> str:
    return f"{end + dt.timedelta(days=1):%Y-%m-%dT%H:%MZ}"


@pytest.mark.django_db
def test_downtime_given_back_moves_the_key_backstop_on_the_node_and_signs_a_manifest_revision(
    shared_preflight, ssh_node, paid_order, operator, client, settings, django_capture_on_commit_callbacks
):
    # Given an active rental on a node behind a real sshd, its last reminder already sent
    settings.DOWNTIME_CREDIT_CAP_HOURS = 72
    order = paid_order()
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(PREPARE.format(order.reference)).status_code == 202
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE
    end = order.ends_at
    grant = AccessGrant.objects.get(order=order)
    AccessGrant.objects.filter(pk=grant.pk).update(reminders_sent=[72])
    assert _key_expiry(ssh_node, grant.account) == _backstop(end)
    token = {"HTTP_X_ORDER_TOKEN": order.access_token}
    manifest_url = client.get(f"/api/v1/orders/{order.reference}/", **token).json()["manifest_url"]
    first = client.get(manifest_url).json()

    # When, a day into the rental, the health probe found the node failing 3 hours ago and it recovered now
    AccessGrant.objects.filter(pk=grant.pk).update(granted_at=timezone.now() - 24 * HOUR)
    ssh_node.refresh_from_db()
    node_transition(node=ssh_node, to=NodeState.DEGRADED, actor="system", reason="probe: a card is missing")
    NodeEvent.objects.filter(node=ssh_node, to_state=NodeState.DEGRADED).update(created_at=timezone.now() - 3 * HOUR)
    with django_capture_on_commit_callbacks(execute=True):
        credit = downtime_episode_close(node_id=ssh_node.pk, until=timezone.now())

    # Then about 3 hours are given back: on the order, on its grant (reminders planned again), and on the node
    assert credit is not None and abs(credit.seconds - 3 * 3600) < 60
    order.refresh_from_db()
    grant.refresh_from_db()
    assert order.ends_at == end + dt.timedelta(seconds=credit.seconds)
    assert (grant.ends_at, grant.reminders_sent) == (order.ends_at, [])
    assert _key_expiry(ssh_node, grant.account) == _backstop(order.ends_at)

    # And a new manifest revision names the credit and the new end, pointing to the previous revision
    manifest = client.get(manifest_url).json()
    public_key = client.get("/manifest-key.pub").content.decode().strip()
    assert manifest_verify(manifest["body"], manifest["signature"], public_key)
    assert manifest["body"]["revision"] == 2
    assert manifest["body"]["previous_body_sha256"] == first["body_sha256"]
    assert manifest["body"]["access"]["ends_at"] == order.ends_at.isoformat()
    (change,) = manifest["body"]["changes"]
    assert change["id"] == f"credit-{credit.pk}"
    assert (change["kind"], change["credit_kind"], change["seconds"]) == ("time_credit", "downtime", credit.seconds)
    assert change["ends_at"] == order.ends_at.isoformat()

    # When the episode is closed again and the job runs again (a retried probe, a crash after the work)
    with django_capture_on_commit_callbacks(execute=True):
        assert downtime_episode_close(node_id=ssh_node.pk, until=timezone.now()).pk == credit.pk
    access_end_follow(order_id=order.pk)

    # Then nothing changes: one credit, the same end on the node, the same revision
    assert RentalCredit.objects.filter(order=order).count() == 1
    assert _key_expiry(ssh_node, grant.account) == _backstop(order.ends_at)
    again = client.get(manifest_url).json()
    assert (again["body"]["revision"], again["signature"]) == (2, manifest["signature"])

    # When staff remove 2 hours, with a reason
    with django_capture_on_commit_callbacks(execute=True):
        removal = rental_time_adjust(order_id=order.pk, seconds=-2 * 3600, reason="Double credit.", actor="olga")

    # Then the end moves back on the order, the grant and the node, and a third revision names the removal
    order.refresh_from_db()
    grant.refresh_from_db()
    assert order.ends_at == end + dt.timedelta(seconds=credit.seconds - 2 * 3600) == removal.ends_at_after
    assert grant.ends_at == order.ends_at
    assert _key_expiry(ssh_node, grant.account) == _backstop(order.ends_at)
    last = client.get(manifest_url).json()
    assert last["body"]["revision"] == 3
    assert [c["id"] for c in last["body"]["changes"]] == [f"credit-{credit.pk}", f"credit-{removal.pk}"]
    assert last["body"]["changes"][1]["reason"] == "Double credit."

"""An operator turns a paid order into working SSH access on a node that passed its preflight, over a
real sshd (sandboxed accounts); the customer logs in, copies files, downloads a signed manifest; access
ends by itself."""

from __future__ import annotations

import datetime as dt

import paramiko
import pytest
from django.core import mail
from django.utils import timezone

from orders.models import OrderStatus
from provisioning.manifest import manifest_verify
from provisioning.models import AccessGrant, NodeState, PreparationRun
from provisioning.tasks import access_revoke_due_task

PREPARE = "/api/v1/orders/{}/prepare/"


def customer_login(node, grant, key_path) -> paramiko.SSHClient:
    """The customer's own SSH client: the node's host key pinned from the order page's fingerprint."""
    ssh = paramiko.SSHClient()
    ssh.set_missing_host_key_policy(paramiko.RejectPolicy())
    key_type, key_data = node.host_key.split()[:2]
    ssh.get_host_keys().add(
        f"[{grant['host']}]:{grant['port']}",
        key_type,
        paramiko.PKey.from_type_string(key_type, __import__("base64").b64decode(key_data)),
    )
    ssh.connect(
        grant["host"],
        port=grant["port"],
        username=grant["user"],
        key_filename=str(key_path),
        allow_agent=False,
        look_for_keys=False,
        timeout=10,
    )
    return ssh


def run(ssh: paramiko.SSHClient, command: str) -> str:
    _stdin, stdout, _stderr = ssh.exec_command(command, timeout=20)
    return stdout.read().decode().strip()


@pytest.mark.django_db
def test_a_paid_order_becomes_working_ssh_access_with_a_signed_manifest(
    ssh_node, paid_order, operator, client, customer_key, django_capture_on_commit_callbacks, settings
):
    settings.DATA_GRACE_HOURS = 0  # the end itself, no time to take data home (tests/.../test_data_grace.py)
    # Given a paid order held on a node behind a real sshd
    order = paid_order()
    assert order.status == OrderStatus.PAID

    # When an operator triggers the preparation through the API (the worker runs it: eager here)
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(PREPARE.format(order.reference))

    # Then the node passed its preflight, the order is active and the clock started at hand-over
    assert response.status_code == 202, response.content
    order.refresh_from_db()
    run_ = PreparationRun.objects.get(order=order)
    assert (run_.status, run_.error) == ("passed", "")
    assert run_.report["ok"] is True and run_.report["order_reference"] == order.reference
    assert order.status == OrderStatus.ACTIVE
    assert order.ends_at - order.active_since == dt.timedelta(days=order.duration_days)
    assert timezone.now() - order.active_since < dt.timedelta(minutes=5)

    # And the customer's order page and API show host, port, user, fingerprint, command, end, manifest
    client.logout()
    body = client.get(f"/api/v1/orders/{order.reference}/", HTTP_X_ORDER_TOKEN=order.access_token).json()
    access = body["access"]
    assert (access["host"], access["port"]) == (ssh_node.host, ssh_node.port)
    assert access["user"] == "o-" + order.reference.lower().replace("-", "")
    assert access["host_key_fingerprint"].startswith("SHA256:")
    assert access["ssh_command"] == f"ssh -p {ssh_node.port} {access['user']}@{ssh_node.host}"
    page = client.get(body["status_url"]).content.decode()
    assert access["ssh_command"] in page and access["host_key_fingerprint"] in page

    # And the manifest verifies offline with the published key, and joins payment, node and report
    manifest = client.get(body["manifest_url"]).json()
    public_key = client.get("/manifest-key.pub").content.decode().strip()
    assert manifest["public_key"] == public_key
    assert manifest_verify(manifest["body"], manifest["signature"], public_key)
    tampered = {**manifest["body"], "gpus": 99}
    assert not manifest_verify(tampered, manifest["signature"], public_key)
    assert manifest["body"]["order_reference"] == order.reference
    assert manifest["body"]["nodes"][0]["report_sha256"] == run_.report_sha256
    assert manifest["body"]["nodes"][0]["host_key_fingerprint"] == access["host_key_fingerprint"]

    # And the customer logs in with their key, and SFTP works
    ssh = customer_login(ssh_node, access, customer_key[0])
    try:
        assert run(ssh, "id -un") == access["user"]
        sftp = ssh.open_sftp()
        with sftp.open("results.txt", "w") as handle:
            handle.write("checkpoint 42")
        assert run(ssh, "cat ~/results.txt") == "checkpoint 42"
    finally:
        ssh.close()
    assert any("access" in message.subject.lower() for message in mail.outbox)

    # When the rental ends (the beat task at ends_at)
    AccessGrant.objects.filter(order=order).update(ends_at=timezone.now() - dt.timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        access_revoke_due_task()

    # Then the account is gone, the order ended and the node is free again
    order.refresh_from_db()
    assert order.status == OrderStatus.ENDED
    ssh_node.refresh_from_db()
    assert ssh_node.state == NodeState.AVAILABLE
    with pytest.raises(paramiko.AuthenticationException):
        customer_login(ssh_node, access, customer_key[0])


@pytest.mark.django_db
def test_a_node_presenting_another_host_key_is_never_handed_over(
    ssh_node, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given the node's pinned host key is not the one its sshd presents
    order = paid_order()
    ssh_node.host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl imposter"
    ssh_node.save()

    # When the operator triggers the preparation
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(PREPARE.format(order.reference))

    # Then the run stops on the host key, nothing is granted and the order waits for the operators
    order.refresh_from_db()
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "error" and "HostKeyMismatch" in run_.error
    assert order.status == OrderStatus.PREPARATION_FAILED
    assert not AccessGrant.objects.filter(order=order).exists()
    console = client.get("/ops/").content.decode()
    assert order.reference in console and "HostKeyMismatch" in console

"""An applied extension reaches the node: the account's key backstop moves with the rental's end (over the real
sandboxed sshd, through the driver), the reminders are planned again, and a new manifest revision is signed
that names the previous one."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction

from orders.models import OrderStatus
from orders.payment_outcome import OrderPaymentOutcome, order_payment_outcome
from provisioning.access import access_extend_on_nodes
from provisioning.manifest import manifest_verify
from provisioning.models import AccessGrant
from provisioning.node_tools.access import account_expiry_day

PREPARE = "/api/v1/orders/{}/prepare/"


def _backstop_line(keys_file) -> str:
    return keys_file.read_text().split(" ", 1)[0]


@pytest.mark.django_db
def test_an_applied_extension_moves_the_key_backstop_on_the_node_and_signs_a_new_manifest_revision(
    shared_preflight, ssh_node, paid_order, operator, client, sandbox_sshd, django_capture_on_commit_callbacks
):
    # Given an active rental on a node behind a real sshd, its last reminder already sent
    order = paid_order()
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(PREPARE.format(order.reference)).status_code == 202
    client.logout()
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE
    ends_before = order.ends_at
    grant = AccessGrant.objects.get(order=order)
    AccessGrant.objects.filter(pk=grant.pk).update(reminders_sent=[72])
    keys_file = sandbox_sshd.home(grant.account) / ".ssh" / "authorized_keys"
    # The grant wrote it a moment before the hand-over started the clock: the same minute, or the one before
    backstop = ends_before + dt.timedelta(days=1)
    assert _backstop_line(keys_file) in {
        f'expiry-time="{moment:%Y%m%d%H%M}Z"' for moment in (backstop, backstop - dt.timedelta(minutes=1))
    }
    token = {"HTTP_X_ORDER_TOKEN": order.access_token}
    body = client.get(f"/api/v1/orders/{order.reference}/", **token).json()
    first = client.get(body["manifest_url"]).json()

    # When the customer asks for 3 more days and the extension's payment is confirmed
    response = client.post(
        f"/api/v1/orders/{order.reference}/extend/", {"duration_days": 3}, content_type="application/json", **token
    )
    assert response.status_code == 201, response.content
    extension_id = response.json()["id"]
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        order_payment_outcome(
            order_id=order.pk, outcome=OrderPaymentOutcome.PAID, reason="paid in the test", extension_id=extension_id
        )

    # Then the rental and its grant end 3 days later, and the reminders start again from the new end
    order.refresh_from_db()
    grant.refresh_from_db()
    assert order.ends_at == ends_before + dt.timedelta(days=3)
    assert (grant.ends_at, grant.reminders_sent) == (order.ends_at, [])
    body = client.get(f"/api/v1/orders/{order.reference}/", **token).json()
    assert body["access"]["ends_at"] == order.ends_at.isoformat().replace("+00:00", "Z")
    assert body["extensions"][0]["status"] == "applied"

    # And on the node the key's expiry and the account's expiry day moved with it
    new_end = order.ends_at + dt.timedelta(days=1)
    assert _backstop_line(keys_file) == f'expiry-time="{new_end:%Y%m%d%H%M}Z"'
    shadow = sandbox_sshd.entry("shadow", grant.account)
    expiry_day = dt.date(1970, 1, 1) + dt.timedelta(days=int(shadow[7]))
    assert expiry_day.isoformat() == account_expiry_day(new_end)

    # And a new manifest revision is signed: the new end, the extension's payment, the previous revision's hash
    manifest = client.get(body["manifest_url"]).json()
    public_key = client.get("/manifest-key.pub").content.decode().strip()
    assert manifest_verify(manifest["body"], manifest["signature"], public_key)
    assert manifest["body"]["revision"] == 2
    assert manifest["body"]["previous_body_sha256"] == first["body_sha256"]
    assert manifest["body"]["access"]["ends_at"] == order.ends_at.isoformat()
    assert manifest["body"]["access"]["starts_at"] == first["body"]["access"]["starts_at"]
    assert manifest["body"]["nodes"] == first["body"]["nodes"]
    assert [e["duration_days"] for e in manifest["body"]["extensions"]] == [3]
    previous = manifest["previous"][0]
    assert (previous["body"], previous["signature"]) == (first["body"], first["signature"])
    assert manifest_verify(previous["body"], previous["signature"], public_key)

    # When the job runs again (a crash after the work, before it was marked done)
    access_extend_on_nodes(extension_id=extension_id)

    # Then nothing changes: the same backstop, the same revision
    assert _backstop_line(keys_file) == f'expiry-time="{new_end:%Y%m%d%H%M}Z"'
    again = client.get(body["manifest_url"]).json()
    assert (again["body"]["revision"], again["signature"]) == (2, manifest["signature"])

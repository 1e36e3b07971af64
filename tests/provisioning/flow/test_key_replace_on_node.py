"""The customer's new SSH key reaches the node: during a rental it is installed on the node over the real
sandboxed sshd (the old key refused from then on) with a new signed manifest revision; and a key the node refused
at preparation is fixed by the customer from the emailed link, which starts the preparation again by itself."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core import mail

from orders.models import OrderStatus, SshKeyChange
from orders.order_links import order_key_form_path, order_status_path
from orders.sshkeys import parse_ssh_public_key
from provisioning import key_replace
from provisioning.access import account_name
from provisioning.drivers import DriverError
from provisioning.key_replace import access_key_replace_on_nodes
from provisioning.manifest import manifest_verify
from provisioning.models import AccessGrant, PreparationRun
from tests import security_keys
from tests.provisioning.conftest import SshKey, login
from tests.provisioning.flow.node_faults import prepare


def key_url(order) -> str:
    return f"/api/v1/orders/{order.reference}/ssh-key/"


@pytest.mark.django_db
def test_a_key_replaced_during_the_rental_logs_in_the_old_one_is_refused_and_the_manifest_names_it(
    shared_preflight, ssh_node, paid_order, customer_key, make_ssh_key, operator, client, sandbox_sshd,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given an active rental on a node behind a real sshd, the customer logged in with their first key
    order = paid_order()
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    assert order.status == OrderStatus.ACTIVE
    client.logout()
    account = account_name(order)
    old = SshKey(private=customer_key[0], public=customer_key[1])
    with login(sandbox_sshd, account, old) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"
    token = {"HTTP_X_ORDER_TOKEN": order.access_token}
    manifest_url = client.get(f"/api/v1/orders/{order.reference}/", **token).json()["manifest_url"]
    first = client.get(manifest_url).json()
    new = make_ssh_key("ada@new-laptop")
    mail.outbox.clear()

    # When the customer replaces the key through the API and the job runs
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(key_url(order), {"ssh_public_key": new.public}, content_type="application/json", **token)
    assert response.status_code == 202, response.content
    assert response.json()["applied_at"] is None  # accepted; the node is written by the job

    # Then the new key logs in and the old one is refused
    with login(sandbox_sshd, account, new) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"
    with pytest.raises(DriverError, match="refused the key"):
        login(sandbox_sshd, account, old)
    # And the order, its grant and the change say so
    order.refresh_from_db()
    change = SshKeyChange.objects.get(order=order)
    assert change.applied_at is not None and change.error == ""
    assert order.ssh_key_fingerprint == new.fingerprint == change.new_fingerprint
    assert AccessGrant.objects.get(order=order).ssh_key_fingerprint == new.fingerprint
    # And a new manifest revision names the new key and the previous one, signed and verifiable
    manifest = client.get(manifest_url).json()
    public_key = client.get("/manifest-key.pub").content.decode().strip()
    assert manifest_verify(manifest["body"], manifest["signature"], public_key)
    assert manifest["body"]["revision"] == 2
    assert manifest["body"]["previous_body_sha256"] == first["body_sha256"]
    assert manifest["body"]["changes"] == [
        {
            "id": f"key-{change.pk}",
            "kind": "ssh_key",
            "ssh_key_fingerprint": new.fingerprint,
            "previous_fingerprint": old.fingerprint,
        }
    ]
    # And the customer is emailed once, the page shows the new key in use
    assert [m.subject for m in mail.outbox] == [f"Order {order.reference}: your new SSH key is installed"]
    assert new.fingerprint in mail.outbox[0].body
    page = client.get(order_status_path(order)).content.decode()
    assert new.fingerprint in page and 'id="ssh-key-pending"' not in page

    # When the job runs again (a crash after the work, before it was marked done): nothing changes
    access_key_replace_on_nodes(change_id=change.pk)
    again = client.get(manifest_url).json()
    assert (again["body"]["revision"], again["signature"]) == (2, manifest["signature"])
    assert len(mail.outbox) == 1


@pytest.mark.django_db
def test_a_key_the_node_refuses_is_fixed_by_the_customer_from_the_email_and_the_preparation_restarts(
    shared_preflight, local_node, fast_preparation, paid_order, make_ssh_key, operator, client, sandbox_sshd,
    monkeypatch, django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given a paid order whose key the node tool refuses (exit 4: the shop's check missed something)
    local_node(name="node-a")
    order = paid_order(preparation=fast_preparation)
    broken = security_keys.sk_line(security_keys.BROKEN["ecdsa-sk-point-off-the-curve"]()).rsplit(" ", 1)[0]
    monkeypatch.setattr("provisioning.access.access_key_line", lambda order: broken + "\n")
    mail.outbox.clear()

    # When the operator prepares it
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    client.logout()

    # Then it stops, and the customer's email links to the key form on their order page
    assert order.status == OrderStatus.PREPARATION_FAILED
    link = settings.SITE_URL + order_key_form_path(order)
    refused = mail.outbox[-1]
    assert refused.subject == f"Order {order.reference}: preparation delayed"
    assert "refused the SSH public key" in refused.body and link in refused.body
    assert link in refused.alternatives[0][0]
    # And the order page tells them to replace it, with the form
    page = client.get(order_status_path(order)).content.decode()
    assert 'data-story="key_refused"' in page and 'id="ssh-key"' in page

    # When they paste a key the node refuses again
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(order_status_path(order) + "ssh-key/", {"ssh_public_key": make_ssh_key().public})
    assert response.status_code == 302

    # Then the preparation ran again by itself, stopped again, and the same email came again
    order.refresh_from_db()
    assert order.status == OrderStatus.PREPARATION_FAILED
    assert order.events.filter(to_status=OrderStatus.PREPARING, actor="customer").count() == 1
    assert [m.subject for m in mail.outbox][-1] == f"Order {order.reference}: preparation delayed"
    assert link in mail.outbox[-1].body

    # When the node accepts keys again and the customer pastes their new key
    monkeypatch.undo()
    new = make_ssh_key("ada@new-laptop")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(order_status_path(order) + "ssh-key/", {"ssh_public_key": new.public}, follow=True)
    assert "Your new SSH key is saved" in response.content.decode()

    # Then the preparation restarted by itself and handed over: the new key logs in
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE, order.events.last().reason
    assert order.events.filter(to_status=OrderStatus.PREPARING, actor="customer").count() == 2
    assert PreparationRun.objects.filter(order=order, requested_by="customer").exists()
    with login(sandbox_sshd, account_name(order), new) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account_name(order)}\n"


@pytest.mark.django_db
def test_a_preparation_that_failed_on_a_node_does_not_restart_when_the_key_is_replaced(
    local_node, paid_order, make_ssh_key, operator, client, django_capture_on_commit_callbacks
):
    # Given a paid order whose only node failed its preflight (the node's fault, the operators' to fix)
    local_node(thresholds={"balance_low_fraction": 1.0, "balance_high_fraction": 0.0})
    order = paid_order()
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    client.logout()
    assert order.status == OrderStatus.PREPARATION_FAILED

    # When the customer replaces the key anyway
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(order_status_path(order) + "ssh-key/", {"ssh_public_key": make_ssh_key().public})

    # Then the order takes the key, and the preparation waits for the operators as before
    assert response.status_code == 302
    order.refresh_from_db()
    assert order.status == OrderStatus.PREPARATION_FAILED
    assert not order.events.filter(actor="customer", to_status=OrderStatus.PREPARING).exists()


@pytest.mark.django_db
def test_a_late_job_for_a_key_replaced_again_never_puts_the_older_key_back(
    shared_preflight,
    ssh_node,
    paid_order,
    make_ssh_key,
    operator,
    client,
    sandbox_sshd,
    django_capture_on_commit_callbacks,
):
    # Given an active rental, and two new keys sent one after the other before any job ran
    order = paid_order()
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    client.logout()
    token = {"HTTP_X_ORDER_TOKEN": order.access_token}
    first, second = make_ssh_key("first@lab"), make_ssh_key("second@lab")
    for key in (first, second):
        response = client.post(key_url(order), {"ssh_public_key": key.public}, content_type="application/json", **token)
        assert response.status_code == 202, response.content
    older, newer = SshKeyChange.objects.filter(order=order).order_by("pk")

    # When the newer key's job runs, then the older one's arrives late
    assert access_key_replace_on_nodes(change_id=newer.pk) == 1
    assert access_key_replace_on_nodes(change_id=older.pk) == 0

    # Then the node carries the newer key only, and the order names it
    account = account_name(order)
    with login(sandbox_sshd, account, second) as session:
        assert session.run(["true"], timeout=30).exit_code == 0
    with pytest.raises(DriverError, match="refused the key"):
        login(sandbox_sshd, account, first)
    order.refresh_from_db()
    older.refresh_from_db()
    assert order.ssh_key_fingerprint == second.fingerprint
    assert older.applied_at is None and older.error

    # When the older job had passed its first check before the newer key came, and wrote the node last
    parsed = parse_ssh_public_key(older.public_key)
    order.refresh_from_db()
    key_replace._on_nodes(order=order, change=older, key_line=f"{parsed.key_type} {parsed.data}\n")
    with django_capture_on_commit_callbacks(execute=True):
        key_replace._apply(change_id=older.pk)

    # Then it sees it was superseded and the newest key is installed again after it
    with login(sandbox_sshd, account, second) as session:
        assert session.run(["true"], timeout=30).exit_code == 0
    with pytest.raises(DriverError, match="refused the key"):
        login(sandbox_sshd, account, first)

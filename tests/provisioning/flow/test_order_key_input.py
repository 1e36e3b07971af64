"""The customer's SSH key is the order's own input: whatever is wrong with it fails that order's step with a
message, and never takes a node out of sale. A comment the node cannot read (`josé@laptop`) once failed
four nodes in a row, one after the other, for one order."""

from __future__ import annotations

import pytest

from orders.models import OrderStatus
from provisioning.access import account_name
from provisioning.drivers.ssh import SSHDriver
from provisioning.models import AccessGrant, Node, NodeState, PreparationRun
from tests import security_keys
from tests.provisioning.flow.node_faults import prepare


def customer_session(sshd, order, key_path) -> SSHDriver:
    return SSHDriver(
        host=sshd.host, port=sshd.port, user=account_name(order), host_key=sshd.host_key, key_file=str(key_path)
    )


@pytest.mark.django_db
def test_a_key_whose_comment_is_not_ascii_is_installed_and_every_node_stays_for_sale(
    shared_preflight, local_node, fast_preparation, paid_order, customer_key, operator, client, sandbox_sshd,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given four free nodes and a paid order whose key's comment is `josé@laptop`
    nodes = [local_node(name=f"node-{index}") for index in range(4)]
    key_type, data = customer_key[1].split()[:2]
    order = paid_order(preparation=fast_preparation, ssh_public_key=f"{key_type} {data} josé@laptop")
    assert order.ssh_public_key == f"{key_type} {data} josé@laptop"

    # When the operator prepares it
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then it is active on the first node, the key works, and no node was set aside
    assert order.status == OrderStatus.ACTIVE, order.events.last().reason
    assert [run.node.name for run in PreparationRun.objects.filter(order=order)] == ["node-0"]
    assert AccessGrant.objects.get(order=order).node == nodes[0]
    assert not Node.objects.filter(state=NodeState.FAILED).exists()
    installed = (sandbox_sshd.home(account_name(order)) / ".ssh" / "authorized_keys").read_text()
    assert installed.endswith(f" {key_type} {data}\n")  # exactly the key type and data, no comment
    with customer_session(sandbox_sshd, order, customer_key[0]) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account_name(order)}\n"


def stored_before_security_keys_were_parsed(order, monkeypatch) -> None:
    """An order placed while the shop let a security key whose data is only its type name through."""
    type(order).objects.filter(pk=order.pk).update(
        ssh_public_key=security_keys.sk_line(security_keys.BROKEN["ed25519-sk-type-name-only"]())
    )


def refused_by_the_node_tool(order, monkeypatch) -> None:
    """The shop's check misses something the node tool refuses (exit 4): the node says it is the key."""
    broken = security_keys.sk_line(security_keys.BROKEN["ecdsa-sk-point-off-the-curve"]()).rsplit(" ", 1)[0]
    monkeypatch.setattr("provisioning.access.access_key_line", lambda order: broken + "\n")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "break_the_key", [stored_before_security_keys_were_parsed, refused_by_the_node_tool], ids=["shop", "node"]
)
def test_a_key_that_cannot_be_installed_fails_the_order_with_a_message_and_never_the_node(
    local_node, fast_preparation, paid_order, operator, client, sandbox_sshd, monkeypatch, break_the_key,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given two free nodes and a paid order whose key cannot be installed
    first, spare = local_node(name="node-a"), local_node(name="node-b")
    order = paid_order(preparation=fast_preparation)
    break_the_key(order, monkeypatch)

    # When the operator prepares it
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the order's step failed, saying it is the customer's SSH key, and operators see it
    assert order.status == OrderStatus.PREPARATION_FAILED
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "refused" and "SSH key" in run_.error, run_.error
    assert "SSH key" in order.events.last().reason
    assert "SSH key" in client.get("/ops/").content.decode()
    # And no node was set aside, nor tried in turn: the lot did not move, the spare node was never touched
    for node in (first, spare):
        node.refresh_from_db()
        assert node.state == NodeState.AVAILABLE, (node.name, node.state_reason)
    assert not PreparationRun.objects.filter(node=spare).exists()
    # And nothing was handed over
    assert not AccessGrant.objects.filter(order=order, revoked_at__isnull=True).exists()
    assert sandbox_sshd.entry("passwd", account_name(order)) is None

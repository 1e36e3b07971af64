"""A node whose sshd reads customers' keys from their homes (OpenSSH's stock `AuthorizedKeysFile .ssh/authorized_keys
.ssh/authorized_keys2`): a tenant there could add keys of its own that outlive a rekey and the data window (issue 39).
The preparation's node check reads `sshd -T` on the node and refuses it before the preflight: the order is
`preparation_failed` with the reason and the setting to use, the node is out of sale, nothing is handed over. Once
the node's sshd is set as docs/production.md says, the operator's retry hands over."""

from __future__ import annotations

import pytest

from provisioning.models import NodeState, PreparationRun
from provisioning.states import node_state_set
from tests.provisioning.flow.node_faults import (
    assert_failure_shown_to_operators,
    assert_handed_over_once,
    assert_nothing_handed_over,
    own_node,
    prepare,
)


@pytest.fixture
def stock_node_server(tmp_path, sandbox_sshd):
    """A node of this test's own with OpenSSH's stock key files; the operator key is the suite's."""
    yield from own_node(tmp_path / "stock-node", sandbox_sshd, stock_keys=True)


@pytest.mark.django_db
def test_a_node_whose_sshd_reads_keys_from_the_home_is_refused_before_the_preflight(
    stock_node_server, node_on, fast_preparation, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given a paid order and the one node, whose sshd has OpenSSH's stock AuthorizedKeysFile
    node = node_on(stock_node_server, "node-stock-sshd")
    order = paid_order(preparation=fast_preparation)

    # When the operator triggers the preparation
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then it fails before the preflight, naming the setting, and the node is out of sale
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "failed"
    assert ".ssh/authorized_keys is in the tenant's home" in run_.error
    assert "/etc/ssh/authorized_keys/%u" in run_.error and "docs/production.md" in run_.error
    assert "preflight" not in run_.log
    assert_failure_shown_to_operators(client, order, "lets a tenant add SSH keys")
    node.refresh_from_db()
    assert node.state == NodeState.FAILED and "lets a tenant add SSH keys" in node.state_reason
    assert_nothing_handed_over(order, stock_node_server)

    # When the operator sets the node's sshd as docs/production.md says and puts it back in service
    config = stock_node_server.config
    stock = "AuthorizedKeysFile .ssh/authorized_keys .ssh/authorized_keys2"
    config.write_text(config.read_text().replace(stock, "AuthorizedKeysFile /etc/ssh/authorized_keys/%u"))
    stock_node_server.halt()
    stock_node_server.restart()
    node_state_set(node_id=node.pk, to=NodeState.AVAILABLE, actor="otto", reason="sshd fixed")
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the retry hands over, and the customer's key is in the file only root writes
    assert_handed_over_once(order, node, stock_node_server)
    grant = order.access_grants.get()
    assert stock_node_server.held_key(grant.account).exists()

"""A GPU node that cannot be reached during its preparation, over real sshds: down (the port refuses),
taken down in the middle of the preflight, or accepting TCP and then silent. Each time the preparation
ends, the order is `preparation_failed` with the reason in its events and in /ops/, nothing is handed
over on any node, and the operator's retry, once the node is back or another node is free, hands over.
What is lost: nothing (the order keeps its payment and gets a node again on the retry)."""

from __future__ import annotations

import socket

import pytest

from orders.models import OrderStatus
from provisioning.models import NodeState, PreparationRun
from provisioning.states import node_state_set
from tests.provisioning.flow.node_faults import (
    WhenPreflightRuns,
    assert_failure_shown_to_operators,
    assert_handed_over_once,
    assert_nothing_handed_over,
    prepare,
    wait_until,
)


def node_back_in_service(node) -> None:
    """What the operator does in the admin once the node is repaired."""
    node_state_set(node_id=node.pk, to=NodeState.AVAILABLE, actor="otto", reason="repaired")


@pytest.mark.django_db
def test_a_node_whose_sshd_is_down_fails_the_preparation_and_the_retry_hands_over_once_it_is_back(
    private_sshd,
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    operator,
    client,
    django_capture_on_commit_callbacks,
):
    # Given the only node's sshd is down: its port refuses connections
    node = node_on(private_sshd, "node-down")
    order = paid_order(preparation=fast_preparation)
    private_sshd.halt()

    # When the operator triggers the preparation
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the run ends in error naming the refusal, the operators see it, and nothing is handed over
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "error" and "Connection refused" in run_.error, run_.error
    assert_failure_shown_to_operators(client, order, "Connection refused")
    assert_nothing_handed_over(order, private_sshd, sandbox_sshd)
    node.refresh_from_db()
    assert node.state == NodeState.FAILED and "Connection refused" in node.state_reason

    # When the node is back and the operator retries
    private_sshd.restart()
    node_back_in_service(node)
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the same node passes and access is handed over once
    assert_handed_over_once(order, node, private_sshd)
    assert [r.status for r in PreparationRun.objects.filter(order=order).order_by("created_at")] == ["error", "passed"]


@pytest.mark.django_db
def test_a_node_taken_down_in_the_middle_of_the_preflight_fails_the_preparation_without_leftovers(
    private_sshd,
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    operator,
    client,
    django_capture_on_commit_callbacks,
):
    # Given the only node, which goes down (sshd and everything it runs) once its preflight ranks run
    node = node_on(private_sshd, "node-crashing")
    order = paid_order(preparation=fast_preparation)
    crash = WhenPreflightRuns(private_sshd, private_sshd.halt, ranks=2)
    crash.start()

    # When the operator triggers the preparation
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    crash.join(timeout=10)

    # Then the preflight was running when the node went down, and the run says the node went away
    assert crash.error is None, crash.error
    assert crash.seen, "the preflight never ran on the node"
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "error" and "the node cannot be reached any more" in run_.error, run_.error
    assert_failure_shown_to_operators(client, order, "cannot be reached any more")
    assert_nothing_handed_over(order, private_sshd, sandbox_sshd)

    # When the node is back and the operator retries
    private_sshd.restart()
    node_back_in_service(node)
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then it hands over once, and nothing of the interrupted attempt runs on the node any more
    assert_handed_over_once(order, node, private_sshd)
    wait_until(lambda: not private_sshd.namespace_pids(), seconds=10, what="sessions were still open on the node")


@pytest.mark.django_db
def test_a_node_that_accepts_tcp_but_never_answers_times_out_and_the_retry_goes_to_a_free_node(
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    operator,
    client,
    django_capture_on_commit_callbacks,
    settings,
):
    # Given the order's node accepts TCP connections and never sends a byte, and no other node is free
    settings.NODE_CONNECT_TIMEOUT_SECONDS = 2
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel completes the handshakes; nobody ever reads or writes
        node = node_on(sandbox_sshd, "node-silent", port=silent.getsockname()[1])
        order = paid_order(preparation=fast_preparation)

        # When the operator triggers the preparation
        seconds = prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then it gives up at the connect timeout instead of hanging, and says so to the operators
    assert seconds < 15, seconds
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "error" and "sent no SSH banner within 2 s" in run_.error, run_.error
    assert_failure_shown_to_operators(client, order, "sent no SSH banner within 2 s")
    assert_nothing_handed_over(order, sandbox_sshd)
    node.refresh_from_db()
    assert node.state == NodeState.FAILED

    # When another node is free and the operator retries
    spare = node_on(sandbox_sshd, "node-spare")
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the lot moved there and access is handed over once; the silent node stays set aside
    assert_handed_over_once(order, spare, sandbox_sshd)
    assert order.reservations.get(released_at__isnull=True).node == spare
    node.refresh_from_db()
    assert node.state == NodeState.FAILED and order.status == OrderStatus.ACTIVE

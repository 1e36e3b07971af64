"""A preflight that runs past PREFLIGHT_TIMEOUT_SECONDS on a node behind a real sshd: an extension op that
never returns (a hung kernel) on both ranks. The node kills the preflight with every process it started,
the order is `preparation_failed` with a reason that names the time limit, nothing is handed over, and
the operator's retry, once the preparation is fixed, hands over. What is lost: nothing."""

from __future__ import annotations

import pytest

from orders.models import Preparation
from provisioning.models import NodeState, PreparationRun
from provisioning.states import node_state_set
from tests.provisioning.flow.node_faults import (
    FAST_PROFILE,
    WhenPreflightRuns,
    assert_failure_shown_to_operators,
    assert_handed_over_once,
    assert_nothing_handed_over,
    prepare,
    wait_until,
)

# seconds: what the hung preflight runs into. Its ranks must have started before the kill, so the test can
# see them die; under load (four workers on two cores, seen in CI) the upload and the ranks' start took
# over 20 s, so the limit leaves that room.
LIMIT = 45
# The retry's limit: the trimmed preflight takes about 10 s alone, but over 20 s beside three other test workers
# on two cores (seen in CI), so the retry gets the room a real preparation would.
RETRY_LIMIT = 120
# An op that never returns on any card; the preflight's own rank timeout is set far beyond the limit.
HUNG = {
    "name": "fault-tests-hung",
    "checks": ["extensions"],
    "extensions": [{"name": "hung-kernel", "module": "time", "op": "mod.sleep(3600)"}],
    "timeout_s": 3600,
}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.django_db
def test_a_preflight_past_its_time_limit_is_killed_on_the_node_and_the_retry_hands_over(
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    operator,
    client,
    django_capture_on_commit_callbacks,
    settings,
):
    # Given a preparation whose preflight hangs on every card, a short limit, and one node
    settings.PREFLIGHT_TIMEOUT_SECONDS = LIMIT
    Preparation.objects.filter(slug=fast_preparation).update(preflight_profile=HUNG)
    node = node_on(sandbox_sshd, "node-hanging")
    order = paid_order(preparation=fast_preparation)
    watcher = WhenPreflightRuns(sandbox_sshd, lambda: None, ranks=2, seconds=LIMIT)
    watcher.start()

    # When the operator triggers the preparation
    seconds = prepare(client, operator, order, django_capture_on_commit_callbacks)
    watcher.join(timeout=5)

    # Then the run stopped at the limit, saying so to the operators
    assert watcher.error is None, watcher.error
    assert LIMIT <= seconds < LIMIT + 15, seconds
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "error", run_.error
    assert f"the preflight exceeded its time limit of {LIMIT} s (PREFLIGHT_TIMEOUT_SECONDS)" in run_.error
    assert_failure_shown_to_operators(client, order, f"exceeded its time limit of {LIMIT} s")
    node.refresh_from_db()
    assert node.state == NodeState.FAILED and "time limit" in node.state_reason

    # And the preflight and its ranks, seen running on the node, are gone: nothing is left there
    assert watcher.seen, "the preflight never ran on the node"
    wait_until(lambda: not any(alive(pid) for pid in watcher.seen), seconds=10, what="preflight processes survived")
    wait_until(lambda: not sandbox_sshd.namespace_pids(), seconds=10, what="processes were left on the node")
    assert_nothing_handed_over(order, sandbox_sshd)

    # When the operators fix the preparation, put the node back in service and retry under a roomier limit
    Preparation.objects.filter(slug=fast_preparation).update(preflight_profile=FAST_PROFILE)
    node_state_set(node_id=node.pk, to=NodeState.AVAILABLE, actor="otto", reason="returned to service")
    settings.PREFLIGHT_TIMEOUT_SECONDS = RETRY_LIMIT
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the same node passes within that limit and access is handed over once
    assert_handed_over_once(order, node, sandbox_sshd)
    retry = PreparationRun.objects.filter(order=order).order_by("created_at").last()
    assert (retry.finished_at - retry.started_at).total_seconds() < RETRY_LIMIT

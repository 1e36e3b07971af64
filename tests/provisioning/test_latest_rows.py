"""Each node's latest check and probe (the console's rows), read in one query whatever the history's length."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from provisioning.models import CheckKind, Node, NodeCheck, NodeHealth
from provisioning.node_checks import checks_latest
from provisioning.rented_node_health import latest_health

pytestmark = pytest.mark.django_db
NOW = timezone.now()


@pytest.fixture
def nodes() -> list[Node]:
    return [Node.objects.create(name=f"node-{i}", driver="local", host="127.0.0.1") for i in range(3)]


def test_the_latest_check_of_each_node_is_the_newest_even_among_many_in_one_query(nodes):
    # Given a long history of checks on two nodes (inserted newest first: ids do not follow time), none on the third
    for node in nodes[:2]:
        for minutes in range(40):
            at = NOW - dt.timedelta(minutes=minutes)
            NodeCheck.objects.create(node=node, kind=CheckKind.PROBE, requested_by="system", created_at=at,
                                     finished_at=at, passed=True, reason=f"{node.name} {minutes}")  # fmt: skip

    # When the console reads them
    with CaptureQueriesContext(connection) as queries:
        latest = checks_latest(nodes)

    # Then each node's newest, nothing for the node never checked, in one query
    assert {node_id: check.reason for node_id, check in latest.items()} == {
        nodes[0].pk: "node-0 0",
        nodes[1].pk: "node-1 0",
    }
    assert len(queries) == 1


def test_the_latest_probe_of_each_node_is_the_newest_and_ties_go_to_the_last_written(nodes):
    for node in nodes:
        for minutes in (30, 5, 20):
            NodeHealth.objects.create(node=node, checked_at=NOW - dt.timedelta(minutes=minutes), reachable=True,
                                      healthy=True, summary=f"{node.name} {minutes}")  # fmt: skip
    NodeHealth.objects.create(node=nodes[2], checked_at=NOW - dt.timedelta(minutes=5), reachable=False,
                              healthy=False, summary="node-2 5 again")  # fmt: skip

    with CaptureQueriesContext(connection) as queries:
        latest = latest_health(node.pk for node in nodes)

    assert [latest[node.pk].summary for node in nodes] == ["node-0 5", "node-1 5", "node-2 5 again"]
    assert len(queries) == 1
    assert latest_health([]) == {}

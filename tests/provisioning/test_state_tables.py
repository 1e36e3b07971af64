"""The node's and the preparation run's status tables: every allowed move is written once with its event,
every other move is refused and changes nothing, and the admin moves a node only through its writer."""

from __future__ import annotations

import io
import itertools

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from core.transition_event import TransitionNotAllowed
from provisioning.models import (
    MoveStatus,
    Node,
    NodeEvent,
    NodeMove,
    NodeMoveEvent,
    NodeState,
    PreparationRun,
    PreparationRunEvent,
    RunStatus,
)
from provisioning.moves import MOVE_OUTCOMES, MOVE_TRANSITIONS, move_transition
from provisioning.states import (
    NODE_TRANSITIONS,
    RUN_OUTCOMES,
    RUN_TRANSITIONS,
    node_transition,
    nodes_transition,
    run_transition,
)
from tests.stored_rows import order_stored

PASSWORD = "a-long-operator-password-42"
NODES_ADMIN = "/admin/fleet/node/"

NODE_ALLOWED = [(src, to) for src, targets in NODE_TRANSITIONS.items() for to in sorted(targets)]
NODE_REFUSED = [
    (src, to)
    for src, to in itertools.product(NodeState.values, repeat=2)
    if src != to and to not in NODE_TRANSITIONS[src]
]
RUN_ALLOWED = [(src, to) for src, targets in RUN_TRANSITIONS.items() for to in sorted(targets)]
RUN_REFUSED = [
    (src, to)
    for src, to in itertools.product(RunStatus.values, repeat=2)
    if src != to and to not in RUN_TRANSITIONS[src]
]
MOVE_ALLOWED = [(src, to) for src, targets in MOVE_TRANSITIONS.items() for to in sorted(targets)]
MOVE_REFUSED = [
    (src, to)
    for src, to in itertools.product(MoveStatus.values, repeat=2)
    if src != to and to not in MOVE_TRANSITIONS[src]
]


def a_node(state: str, name: str = "node-1") -> Node:
    return Node.objects.create(name=name, driver="local", host="127.0.0.1", state=state, state_reason="before")


def a_run(status: str) -> PreparationRun:
    order = order_stored()
    return PreparationRun.objects.create(order=order, node=a_node(NodeState.PREPARING), status=status, requested_by="t")


def test_every_status_has_a_row_in_its_table():
    assert set(NODE_TRANSITIONS) == set(NodeState.values)
    assert set(RUN_TRANSITIONS) == set(RunStatus.values)
    assert set(MOVE_TRANSITIONS) == set(MoveStatus.values)
    assert all(targets <= set(MoveStatus.values) for targets in MOVE_TRANSITIONS.values())
    assert all(targets <= set(NodeState.values) for targets in NODE_TRANSITIONS.values())
    assert all(targets <= set(RunStatus.values) for targets in RUN_TRANSITIONS.values())


@pytest.mark.parametrize(("src", "to"), NODE_ALLOWED)
def test_an_allowed_node_move_is_saved_with_one_event(db, src, to):
    # Given a node in `src`
    node = a_node(src)

    # When it moves to `to`
    moved = node_transition(node=node, to=to, actor="olga", reason="why it moved")

    # Then the state is saved, with one event saying who, from, to and why
    node.refresh_from_db()
    assert moved and node.state == to
    event = NodeEvent.objects.get(node=node)
    assert (event.actor, event.from_state, event.to_state, event.reason) == ("olga", src, to, "why it moved")
    # The reason is shown on the node while it is out of sale, and cleared when it sells again
    assert node.state_reason == ("why it moved" if to in {"maintenance", "failed", "revoking", "degraded"} else "")


@pytest.mark.parametrize(("src", "to"), NODE_REFUSED)
def test_a_node_move_outside_the_table_is_refused_and_changes_nothing(db, src, to):
    node = a_node(src)

    with pytest.raises(TransitionNotAllowed, match=f"node node-1: {src} -> {to} is not allowed"):
        node_transition(node=node, to=to, actor="olga", reason="why")

    node.refresh_from_db()
    assert (node.state, node.state_reason) == (src, "before")
    assert not NodeEvent.objects.exists()


@pytest.mark.parametrize("state", NodeState.values)
def test_a_node_moved_to_its_own_state_writes_nothing(db, state):
    node = a_node(state)

    assert node_transition(node=node, to=state, actor="olga", reason="again") is False

    node.refresh_from_db()
    assert (node.state, node.state_reason) == (state, "before")
    assert not NodeEvent.objects.exists()


def test_nodes_moved_together_get_one_event_each_and_those_already_there_none(db):
    # Given two available nodes and one already preparing
    first, second = a_node(NodeState.AVAILABLE, "node-a"), a_node(NodeState.AVAILABLE, "node-b")
    third = a_node(NodeState.PREPARING, "node-c")

    # When all three are moved to preparing
    moved = nodes_transition(node_ids=[first.pk, second.pk, third.pk], to=NodeState.PREPARING, actor="system")

    # Then the two that moved have one event each, and the third none
    assert [node.name for node in moved] == ["node-a", "node-b"]
    assert sorted(NodeEvent.objects.values_list("node__name", flat=True)) == ["node-a", "node-b"]
    assert set(Node.objects.values_list("state", flat=True)) == {NodeState.PREPARING}


@pytest.mark.parametrize(("src", "to"), RUN_ALLOWED)
def test_an_allowed_run_move_is_saved_with_one_event(db, src, to):
    run = a_run(src)

    assert run_transition(run=run, to=to, actor="system", reason="why it moved")

    run.refresh_from_db()
    assert run.status == to
    event = PreparationRunEvent.objects.get(run=run)
    assert (event.actor, event.from_status, event.to_status, event.reason) == ("system", src, to, "why it moved")
    # An outcome stamps the end of the run
    assert (run.finished_at is not None) == (to in RUN_OUTCOMES)


@pytest.mark.parametrize(("src", "to"), RUN_REFUSED)
def test_a_run_move_outside_the_table_is_refused_and_changes_nothing(db, src, to):
    run = a_run(src)

    with pytest.raises(TransitionNotAllowed, match=f"preparation run {run.pk}: {src} -> {to} is not allowed"):
        run_transition(run=run, to=to, actor="system", reason="why")

    run.refresh_from_db()
    assert (run.status, run.finished_at) == (src, None)
    assert not PreparationRunEvent.objects.exists()


@pytest.mark.parametrize("status", RunStatus.values)
def test_a_run_moved_to_its_own_status_writes_nothing(db, status):
    run = a_run(status)

    assert run_transition(run=run, to=status, actor="system") is False

    run.refresh_from_db()
    assert (run.status, run.finished_at) == (status, None)
    assert not PreparationRunEvent.objects.exists()


def a_move(status: str) -> NodeMove:
    order = order_stored()
    return NodeMove.objects.create(order=order, from_node=a_node(NodeState.DEGRADED), status=status, requested_by="t")


@pytest.mark.parametrize(("src", "to"), MOVE_ALLOWED)
def test_an_allowed_move_of_a_rental_is_saved_with_one_event(db, src, to):
    move = a_move(src)

    assert move_transition(move=move, to=to, actor="system", reason="why it moved")

    move.refresh_from_db()
    assert move.status == to
    event = NodeMoveEvent.objects.get(move=move)
    assert (event.actor, event.from_status, event.to_status, event.reason) == ("system", src, to, "why it moved")
    assert (move.finished_at is not None) == (to in MOVE_OUTCOMES)


@pytest.mark.parametrize(("src", "to"), MOVE_REFUSED)
def test_a_move_of_a_rental_outside_the_table_is_refused_and_changes_nothing(db, src, to):
    move = a_move(src)

    with pytest.raises(TransitionNotAllowed, match=f"move {move.pk}: {src} -> {to} is not allowed"):
        move_transition(move=move, to=to, actor="system", reason="why")

    move.refresh_from_db()
    assert (move.status, move.finished_at) == (src, None)
    assert not NodeMoveEvent.objects.exists()


@pytest.fixture
def operator_client(db, client):
    call_command("add_staff", "olga", "--role", "operator", "--password", PASSWORD, stdout=io.StringIO())
    client.login(username="olga", password=PASSWORD)
    return client


def test_the_admin_shows_the_node_state_read_only_and_ignores_a_posted_state(operator_client):
    # Given an available node
    node = a_node(NodeState.AVAILABLE)
    user = get_user_model().objects.get(username="olga")
    assert user.has_perm("fleet.change_node")

    # When the operator opens its page, and posts a change that includes a state
    page = operator_client.get(f"{NODES_ADMIN}{node.pk}/change/")
    form = page.context["adminform"].form
    data = {field: value for field, value in form.initial.items() if field in form.fields}
    data.update(thresholds="{}", created_at_0=f"{node.created_at:%Y-%m-%d}", created_at_1=f"{node.created_at:%H:%M:%S}")
    for inline in page.context["inline_admin_formsets"]:  # the events' (read-only) formset
        prefix = inline.formset.prefix
        data.update({f"{prefix}-{key}": value for key, value in inline.formset.management_form.initial.items()})
    data.update(host="10.0.0.9", state=NodeState.IN_USE)
    change = operator_client.post(f"{NODES_ADMIN}{node.pk}/change/", data)

    # Then the state is shown, not editable; the host changed, the state did not
    assert page.status_code == 200
    assert "state" not in form.fields and 'name="state"' not in page.content.decode()
    assert change.status_code == 302
    node.refresh_from_db()
    assert (node.host, node.state) == ("10.0.0.9", NodeState.AVAILABLE)
    assert not NodeEvent.objects.exists()


def test_the_admin_actions_move_a_node_through_its_writer(operator_client):
    # Given an available node
    node = a_node(NodeState.AVAILABLE)
    selected = {"_selected_action": [node.pk]}

    # When the operator puts it in maintenance, first without a reason, then with one
    asked = operator_client.post(NODES_ADMIN, {"action": "put_in_maintenance", **selected})
    operator_client.post(NODES_ADMIN, {"action": "put_in_maintenance", "reason": "new fans", **selected})

    # Then the reason was asked for, and the node is in maintenance with an event naming the operator
    assert asked.status_code == 200 and "reason" in asked.content.decode()
    node.refresh_from_db()
    assert (node.state, node.state_reason) == (NodeState.MAINTENANCE, "new fans")

    # When the operator returns it to service
    operator_client.post(NODES_ADMIN, {"action": "return_to_service", **selected})

    # Then it is available again, and each move is one event
    node.refresh_from_db()
    assert (node.state, node.state_reason) == (NodeState.AVAILABLE, "")
    events = list(NodeEvent.objects.values_list("actor", "from_state", "to_state", "reason"))
    assert events == [
        ("olga", "available", "maintenance", "new fans"),
        ("olga", "maintenance", "available", "returned to service in the admin"),
    ]


def test_the_admin_refuses_to_put_a_node_in_use_in_maintenance(operator_client):
    node = a_node(NodeState.IN_USE)

    response = operator_client.post(
        NODES_ADMIN, {"action": "put_in_maintenance", "reason": "fans", "_selected_action": [node.pk]}, follow=True
    )

    assert "cannot move from in use to maintenance" in response.content.decode()
    node.refresh_from_db()
    assert node.state == NodeState.IN_USE
    assert not NodeEvent.objects.exists()

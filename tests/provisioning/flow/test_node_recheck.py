"""Nodes between rentals, over real sshds and the development (CPU) preflight: an operator's recheck brings a
failed or maintenance node back (API, command, console button), a recheck that fails keeps it failed with the
reason, a busy node is refused, and beat's daily probe sets aside an idle node that cannot be reached (sshd
stopped, another host key) or whose cards are busy (the FAKE nvidia-smi of
tests/provisioning/preflight/fake_tools.py, in the node's namespace), leaving healthy and rented nodes alone."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from orders.models import Preparation
from provisioning import node_steps
from provisioning.models import CheckKind, NodeCheck, NodeEvent, NodeState, PreparationRun
from provisioning.node_checks import recheck_start
from provisioning.states import node_state_set
from provisioning.tasks import node_check_task, node_probe_idle_task
from tests.provisioning.flow.node_faults import prepare
from tests.provisioning.flow.test_fault_database_error import fails_once, retries_run_in_process  # noqa: F401
from tests.provisioning.preflight import fake_tools

RECHECK = "/api/v1/nodes/{}/recheck/"
BUTTON = "/ops/nodes/{}/recheck/"


def recheck_api(client, node, capture, **body):
    """The operator's API call; the recheck's job runs in-process once the request commits."""
    with capture(execute=True):
        response = client.post(RECHECK.format(node.name), body, content_type="application/json")
    node.refresh_from_db()
    return response


def probe(capture) -> list[NodeCheck]:
    """Beat's daily pass; each probe's job runs in-process once stored."""
    before = set(NodeCheck.objects.values_list("pk", flat=True))
    with capture(execute=True):
        node_probe_idle_task.delay()
    return list(NodeCheck.objects.exclude(pk__in=before).select_related("node").order_by("node__name"))


def set_aside(node, to=NodeState.FAILED, reason="the preflight failed: allreduce: wrong sum"):
    """A node out of sale as a failed preparation or an operator leaves it (the one writer)."""
    node_state_set(node_id=node.pk, to=to, actor="system", reason=reason)
    node.refresh_from_db()
    assert node.state == to


@pytest.fixture
def broken_preparation(db):
    """A preparation whose setup step fails on any node: a recheck with it fails, saying why."""
    return Preparation.objects.create(
        slug="broken-setup",
        name_en="Broken setup",
        description_en="Its setup step always fails.",
        setup_script="echo 'the CUDA driver is gone' >&2\nexit 3\n",
        preflight_profile={"checks": ["stack"]},
    )


@pytest.mark.django_db
def test_the_probe_sets_aside_a_node_whose_sshd_is_down_and_an_api_recheck_brings_it_back(
    private_sshd, sandbox_sshd, node_on, fast_preparation, operator, client, django_capture_on_commit_callbacks
):
    # Given two idle nodes: a healthy one, and one whose sshd is down
    healthy = node_on(sandbox_sshd, "node-healthy")
    down = node_on(private_sshd, "node-down")
    private_sshd.halt()

    # When beat's daily probe runs
    checks = probe(django_capture_on_commit_callbacks)

    # Then each idle node was probed once; the unreachable one is failed with the reason, the healthy one untouched
    assert [(c.node.name, c.kind, c.requested_by, c.passed) for c in checks] == [
        ("node-down", CheckKind.PROBE, "system", False),
        ("node-healthy", CheckKind.PROBE, "system", True),
    ]
    down.refresh_from_db()
    healthy.refresh_from_db()
    assert down.state == NodeState.FAILED and "Connection refused" in down.state_reason, down.state_reason
    assert healthy.state == NodeState.AVAILABLE
    assert "reached node-healthy, host key SHA256:" in checks[1].reason
    assert "cpu node" in checks[1].reason  # no cards to look at on a development node
    event = NodeEvent.objects.filter(node=down).last()
    assert (event.from_state, event.to_state, event.actor) == ("available", "failed", "system")

    # When the node is back and an operator rechecks it through the API
    private_sshd.restart()
    client.force_login(operator)
    response = recheck_api(client, down, django_capture_on_commit_callbacks, preparation=fast_preparation)

    # Then the preflight ran on it without an order and it is for sale again
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["node"], body["kind"], body["requested_by"], body["preparation"]) == (
        "node-down",
        "recheck",
        "olga",
        fast_preparation,
    )
    check = NodeCheck.objects.get(pk=body["id"])
    assert check.passed is True and check.finished_at is not None, check.reason
    assert check.report["ok"] is True and check.report["order_reference"] is None and len(check.report_sha256) == 64
    assert {c["name"] for c in check.report["checks"] if c["status"] == "pass"} >= {"stack", "load", "allreduce"}
    assert down.state == NodeState.AVAILABLE and down.state_reason == ""
    assert NodeEvent.objects.filter(node=down).last().actor == "olga"
    # And no account was made on the node, no preparation run recorded
    assert not PreparationRun.objects.filter(node=down).exists()
    home = private_sshd.sandbox / "home"
    assert not [p.name for p in home.iterdir() if p.name.startswith("o-")]


@pytest.mark.django_db
def test_the_probe_sets_aside_a_node_that_presents_another_host_key(
    private_sshd, sandbox_sshd, node_on, django_capture_on_commit_callbacks
):
    # Given an idle node row pinned to another machine's host key (the suite's sshd), at this sshd's address
    impostor = node_on(private_sshd, "node-impostor", host_key=sandbox_sshd.host_key)

    # When beat's probe runs
    (check,) = probe(django_capture_on_commit_callbacks)

    # Then the node is failed, naming the key it presented
    impostor.refresh_from_db()
    assert check.passed is False and "HostKeyMismatch" in check.reason
    assert impostor.state == NodeState.FAILED and "presented host key" in impostor.state_reason

    # And the check's job delivered again does nothing: the check, the node and its events stay as they are
    events = NodeEvent.objects.filter(node=impostor).count()
    assert node_check_task(check.pk) is None
    check.refresh_from_db()
    assert check.attempt == 1 and NodeEvent.objects.filter(node=impostor).count() == events
    # And the next day's probe leaves the failed node alone: only a recheck brings it back
    assert probe(django_capture_on_commit_callbacks) == []


@pytest.mark.django_db
def test_the_probe_sets_aside_a_node_whose_cards_are_busy_and_leaves_an_idle_one(
    private_sshd, sandbox_sshd, node_on, django_capture_on_commit_callbacks
):
    # Given two idle GPU nodes whose FAKE nvidia-smi (no GPU here) lists two B200 cards: one with a process on card 1
    busy_board = {
        **fake_tools.TWO_B200,
        "--query-gpu=index,uuid,memory.used": fake_tools.ok(
            f"0, {fake_tools.UUIDS[0]}, 0\n1, {fake_tools.UUIDS[1]}, 40213\n"
        ),
        "--query-compute-apps=": fake_tools.ok(f"{fake_tools.UUIDS[1]}, 4242, python, 40200\n"),
    }
    for server, board in ((sandbox_sshd, fake_tools.TWO_B200), (private_sshd, busy_board)):
        fake_tools.install(server.sandbox / "gpu-tools", nvidia_smi=board)
    try:
        idle = node_on(sandbox_sshd, "node-idle-cards", preflight_device="cuda")
        busy = node_on(private_sshd, "node-busy-cards", preflight_device="cuda")

        # When beat's probe runs
        checks = probe(django_capture_on_commit_callbacks)
    finally:
        (sandbox_sshd.sandbox / "gpu-tools" / "nvidia-smi").unlink()

    # Then the busy node is failed with the preflight gate's own words, the idle one stays for sale
    assert [(c.node.name, c.passed) for c in checks] == [("node-busy-cards", False), ("node-idle-cards", True)]
    busy.refresh_from_db()
    idle.refresh_from_db()
    assert busy.state == NodeState.FAILED
    assert "GPU 1 uses 40213 MiB held by pid 4242 python (40200 MiB)" in busy.state_reason, busy.state_reason
    assert idle.state == NodeState.AVAILABLE and "2 cards idle" in checks[1].reason, checks[1].reason


@pytest.mark.django_db
def test_the_probe_leaves_rented_held_and_set_aside_nodes_alone(
    local_node, fast_preparation, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given a rented node, a node held by an unpaid order, a failed node and one idle node
    rented = local_node(name="node-rented")
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    rented.refresh_from_db()
    assert rented.state == NodeState.IN_USE
    held = local_node(name="node-held")
    paid_order(preparation=fast_preparation)  # holds node-held (paid: held until prepared)
    failed = local_node(name="node-failed")
    set_aside(failed)
    idle = local_node(name="node-idle")

    # When beat's probe runs
    checks = probe(django_capture_on_commit_callbacks)

    # Then only the idle node was probed
    assert [c.node.name for c in checks] == [idle.name]
    for node, state in ((rented, NodeState.IN_USE), (held, NodeState.AVAILABLE), (failed, NodeState.FAILED)):
        node.refresh_from_db()
        assert node.state == state


@pytest.mark.django_db
def test_the_command_brings_a_maintenance_node_back(local_node, fast_preparation, django_capture_on_commit_callbacks):
    # Given a node an operator put in maintenance
    node = local_node(name="node-serviced")
    set_aside(node, to=NodeState.MAINTENANCE, reason="new fans")

    # When the operator runs the command (the worker runs the recheck once it is stored)
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("node_recheck", node.name, "--preparation", fast_preparation, "--actor", "otto", stdout=out)

    # Then it passed and the node is available again
    check = NodeCheck.objects.get(node=node)
    assert f"recheck {check.pk} of node-serviced stored" in out.getvalue()
    assert (check.kind, check.requested_by, check.passed) == (CheckKind.RECHECK, "otto", True), check.reason
    node.refresh_from_db()
    assert node.state == NodeState.AVAILABLE
    event = NodeEvent.objects.filter(node=node).last()
    assert (event.from_state, event.to_state, event.actor) == ("maintenance", "available", "otto")
    assert f"recheck {check.pk} passed" in event.reason

    # And the command refuses an unknown node and a node for sale, saying why
    with pytest.raises(CommandError, match="no node 'node-nope'"):
        call_command("node_recheck", "node-nope")
    with pytest.raises(CommandError, match="only a failed node or one in maintenance"):
        call_command("node_recheck", node.name)


@pytest.mark.django_db
def test_the_console_button_rechecks_a_failed_node_and_the_row_shows_the_outcome(
    local_node, fast_preparation, operator, client, django_capture_on_commit_callbacks
):
    # Given a failed node, shown in /ops/ with a Recheck button (and an available node, without one)
    node = local_node(name="node-broken")
    set_aside(node)
    local_node(name="node-fine")
    client.force_login(operator)
    console = client.get("/ops/").content.decode()
    assert BUTTON.format("node-broken") in console and BUTTON.format("node-fine") not in console

    # When the operator presses it (the default preparation, trimmed to the fast checks)
    Preparation.objects.filter(slug="two-card-distributed").update(
        preflight_profile=Preparation.objects.get(slug=fast_preparation).preflight_profile, setup_script=""
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(BUTTON.format(node.name), follow=True)

    # Then the node is available again and its row says the recheck passed
    node.refresh_from_db()
    assert node.state == NodeState.AVAILABLE
    check = NodeCheck.objects.get(node=node)
    assert check.passed is True and check.preparation.slug == "two-card-distributed"
    assert f"node-broken: recheck {check.pk} started" in response.content.decode()
    page = client.get("/ops/").content.decode()
    assert "Last recheck (olga," in page and "passed</small>" in page


@pytest.mark.django_db
def test_a_recheck_that_fails_keeps_the_node_failed_with_the_new_reason(
    local_node, broken_preparation, operator, client, admin_client, django_capture_on_commit_callbacks
):
    # Given a failed node and one in maintenance
    failed = local_node(name="node-failed")
    set_aside(failed)
    serviced = local_node(name="node-serviced")
    set_aside(serviced, to=NodeState.MAINTENANCE, reason="new fans")
    client.force_login(operator)

    # When each is rechecked with a preparation whose setup step fails on the node
    for node in (failed, serviced):
        response = recheck_api(client, node, django_capture_on_commit_callbacks, preparation=broken_preparation.slug)
        assert response.status_code == 202, response.content

    # Then both are failed, the reason being the recheck's, on the node, its events and the check
    for node in (failed, serviced):
        check = NodeCheck.objects.get(node=node)
        assert check.passed is False and "the setup step exited with 3" in check.reason, check.reason
        assert "the CUDA driver is gone" in check.reason
        assert node.state == NodeState.FAILED and "recheck: the setup step exited with 3" in node.state_reason
        event = NodeEvent.objects.filter(node=node).last()
        assert event.to_state == NodeState.FAILED and event.actor == "olga" and "exited with 3" in event.reason
    assert NodeEvent.objects.filter(node=failed).last().from_state == NodeState.FAILED  # stayed failed, new reason
    assert NodeEvent.objects.filter(node=serviced).last().from_state == NodeState.MAINTENANCE
    # And the console shows why
    console = client.get("/ops/").content.decode()
    assert "Last recheck (olga," in console and "failed: recheck: the setup step exited with 3" in console
    # And so does the admin's list of checks
    admin_list = admin_client.get("/admin/provisioning/nodecheck/?kind=recheck").content.decode()
    assert (
        "node-failed" in admin_list and "node-serviced" in admin_list and "the setup step exited with 3" in admin_list
    )


@pytest.mark.django_db
def test_a_busy_node_and_a_node_already_being_checked_are_refused(
    local_node, fast_preparation, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given a rented node, an available one and a failed one whose recheck is already stored (not run yet)
    rented = local_node(name="node-rented")
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    available = local_node(name="node-free")
    failed = local_node(name="node-failed")
    set_aside(failed)
    first = recheck_start(node=failed, actor="otto")
    client.force_login(operator)

    # When the operator asks for a recheck of each
    answers = {node.name: client.post(RECHECK.format(node.name)) for node in (rented, available, failed)}

    # Then each is refused with a 409 saying why, and nothing more is stored
    assert {name: response.status_code for name, response in answers.items()} == dict.fromkeys(answers, 409)
    assert "node-rented is in use" in answers["node-rented"].json()["detail"]
    assert "never rechecked" in answers["node-rented"].json()["detail"]
    assert "node-free is available" in answers["node-free"].json()["detail"]
    assert "already being checked" in answers["node-failed"].json()["detail"]
    assert list(NodeCheck.objects.values_list("pk", flat=True)) == [first.pk]
    # And the console button says the same
    page = client.post(BUTTON.format(failed.name), follow=True).content.decode()
    assert "already being checked" in page


@pytest.mark.django_db
def test_only_operators_recheck_nodes(local_node, operator, reviewer, client, django_capture_on_commit_callbacks):
    # Given a failed node
    node = local_node(name="node-failed")
    set_aside(node)

    # Then anonymous callers and other staff are refused, and nothing is stored
    assert client.post(RECHECK.format(node.name)).status_code in (401, 403)
    assert client.post(RECHECK.format(node.name), HTTP_AUTHORIZATION="Token nope").status_code in (401, 403)
    assert client.post(BUTTON.format(node.name)).status_code == 302  # to the login page
    client.force_login(reviewer)
    assert client.post(RECHECK.format(node.name)).status_code == 403
    assert client.post(BUTTON.format(node.name)).status_code == 403
    assert not NodeCheck.objects.exists()

    # And an operator's token from drf_create_token works; an unknown node or preparation is said so
    client.logout()
    out = StringIO()
    call_command("drf_create_token", operator.username, stdout=out)
    token = {"HTTP_AUTHORIZATION": f"Token {out.getvalue().split()[2]}"}
    assert client.post(RECHECK.format("node-nope"), **token).status_code == 404
    unknown = client.post(RECHECK.format(node.name), {"preparation": "nope"}, content_type="application/json", **token)
    assert unknown.status_code == 400 and "no preparation 'nope'" in unknown.json()["preparation"][0]
    Preparation.objects.filter(slug="two-card-distributed").update(preflight_profile={"checks": ["stack"]})
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(RECHECK.format(node.name), **token)
    assert response.status_code == 202 and response.json()["requested_by"] == "olga"
    node.refresh_from_db()
    assert node.state == NodeState.AVAILABLE


@pytest.mark.django_db
@pytest.mark.usefixtures("retries_run_in_process")
def test_a_database_error_during_a_recheck_is_retried_and_never_blamed_on_the_node(
    local_node, fast_preparation, monkeypatch, django_capture_on_commit_callbacks
):
    # Given a failed node and a database that fails once while the recheck writes its progress
    node = local_node(name="node-flaky-db")
    set_aside(node)
    raised = fails_once(monkeypatch, (node_steps, "progress_write"))

    # When its recheck runs
    with django_capture_on_commit_callbacks(execute=True):
        check = recheck_start(node=node, actor="otto", preparation=fast_preparation)

    # Then the task ran it again as its next attempt, which passed: the node is back, not blamed
    assert raised
    check.refresh_from_db()
    assert (check.passed, check.attempt) == (True, 2), check.reason
    assert "attempt 2: the previous attempt was lost" in check.log
    node.refresh_from_db()
    assert node.state == NodeState.AVAILABLE

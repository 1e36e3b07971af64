"""Rented nodes are watched: the health probe of a node with live access, over the real sandboxed sshd, with the
suite's FAKE nvidia-smi and a FAKE dmesg in the node's gpu-tools folder (this machine has no GPU and its kernel
log has no XID). A card missing, an XID 79, an uncorrectable ECC error, an NVLink link down and an unreachable
node each make the rented node degraded and tell the operators and the customer once; a passing probe brings it
back to in use and gives the downtime back on the rental. The tenant's processes are left alone."""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from django.core import mail
from django.db.models import F
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from orders.models import CreditKind, OrderStatus, RentalCredit
from orders.order_links import order_status_path
from provisioning.models import AccessGrant, DowntimeHold, NodeEvent, NodeHealth, NodeState
from provisioning.rented_node_health import downtime_close_due, health_probe, health_probes_start
from provisioning.tasks import access_revoke_due_task, node_health_probes_task
from tests.provisioning.flow.node_faults import node_processes, prepare, wait_until
from tests.provisioning.preflight.fake_tools import ANY, UUIDS, nvlink_status, ok

OPS = "ops@example.org"
CARDS = "--query-gpu=index,uuid,pci.bus_id"
BUS = ("00000000:1B:00.0", "00000000:43:00.0")


def board(*, cards: int = 2, volatile: int = 0, link_down: bool = False) -> dict:
    """nvidia-smi's answers to the health tool's queries, for a board of `cards` B200 cards."""
    rows = "".join(f"{i}, {UUIDS[i]}, {BUS[i]}, {volatile if i == 1 else 0}, {volatile if i == 1 else 0}, No\n"
                   for i in range(cards))  # fmt: skip
    links = [["53.125 GB/s"] * 18 for _ in range(cards)]
    if link_down:
        links[0][7] = "<inactive>"
    return {
        CARDS: ok(rows),
        "--query-remapped-rows=": ok("".join(f"{UUIDS[i]}, 0, 0, No, No\n" for i in range(cards))),
        "nvlink --status": ok(nvlink_status(links)),
        "clocks_event_reasons": ok("".join(f"{i}, {', '.join(['Not Active'] * 4)}\n" for i in range(cards))),
    }


def uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def kernel_log(*xids: float) -> str:
    """dmesg's lines: ordinary ones, and an XID 79 at each of these kernel-log seconds."""
    now = uptime()
    lines = [f"[{now - 500:12.6f}] nvidia-nvswitch0: probe successful"]
    xid = "NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
    lines += [f"[{at:12.6f}] {xid}" for at in xids]
    return "\n".join(lines) + "\n"


def fake(tool: str, canned: dict) -> str:
    """A FAKE tool whose canned answers are in the script itself: a login that is not root reads no test folder."""
    lines = [
        "#!/bin/sh",
        f"# FAKE {tool}, written by tests/provisioning/flow/test_rented_node_health.py: no GPU on this machine.",
        'case "$*" in',
    ]
    for pattern, (stdout, stderr, status) in canned.items():
        said = f"printf '%s' {shlex.quote(stdout)}; printf '%s' {shlex.quote(stderr)} >&2"
        lines.append(f"  *{shlex.quote(pattern)}*) {said}; exit {status} ;;")
    lines += [f'  *) echo "fake {tool}: no canned output for: $*" >&2; exit 99 ;;', "esac", ""]
    return "\n".join(lines)


def xid_log(server) -> Path:
    return server.sandbox / "var" / "lib" / "b200-health" / "xid.jsonl"


def xid_events(server, *xids: int) -> None:
    """The node's XID watcher (xid_watch.py, which needs NVML: no GPU here) logged these XIDs just now: the FAKE
    log it would write, root's, under the sandbox's accounts root."""
    log = xid_log(server)
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    at = round(time.time() + 1, 6)  # as the watcher writes it
    with open(log, "a") as handle:
        for xid in xids:
            handle.write(json.dumps({"at": at, "index": 0, "uuid": UUIDS[0], "xid": xid}) + "\n")
            at += 0.001


def node_tools(server, *, nvidia_smi: dict, dmesg: str) -> None:
    """The FAKE nvidia-smi and FAKE dmesg in the node's gpu-tools folder (first on the node's PATH)."""
    folder = server.sandbox / "gpu-tools"
    for tool, canned in (("nvidia-smi", nvidia_smi), ("dmesg", {ANY: ok(dmesg)})):
        path = folder / tool
        path.write_text(fake(tool, canned))
        path.chmod(0o755)


@pytest.fixture
def rented(
    shared_preflight,
    ssh_node,
    paid_order,
    operator,
    client,
    fast_preparation,
    sandbox_sshd,
    django_capture_on_commit_callbacks,
):
    """An active rental on the sandboxed node, its operators reachable by email; the fakes removed after."""
    operator.email = OPS
    operator.save()
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    assert order.status == OrderStatus.ACTIVE, [event.reason for event in order.events.all()]
    # The rental began two hours ago: the downtime the test makes up (earlier()) falls within it
    AccessGrant.objects.filter(order=order).update(granted_at=F("granted_at") - dt.timedelta(hours=2))
    node_tools(sandbox_sshd, nvidia_smi=board(), dmesg=kernel_log())
    xid_events(sandbox_sshd)  # the node's XID watcher runs: its log is there, empty
    mail.outbox.clear()
    try:
        yield order
    finally:
        for tool in ("nvidia-smi", "dmesg"):
            (sandbox_sshd.sandbox / "gpu-tools" / tool).unlink(missing_ok=True)
        xid_log(sandbox_sshd).unlink(missing_ok=True)


def probe(node, capture) -> NodeHealth:
    """One probe of the node, its emails sent (the job outbox runs on commit)."""
    with capture(execute=True):
        row = health_probe(node_id=node.pk)
    node.refresh_from_db()
    return row


def sent(order, words: str) -> int:
    return sum(1 for message in mail.outbox if order.email in message.to and words in message.subject)


def staff_told(node) -> int:
    return sum(1 for message in mail.outbox if OPS in message.to and f"Node {node.name} degraded" in message.subject)


def earlier(node, minutes: int) -> None:
    """The degraded episode began `minutes` ago (the probes would have kept failing meanwhile)."""
    event = NodeEvent.objects.filter(node=node, to_state=NodeState.DEGRADED).latest("created_at")
    NodeEvent.objects.filter(pk=event.pk).update(created_at=event.created_at - dt.timedelta(minutes=minutes))


def tenant_process(ssh_node, key_path, account: str) -> None:
    """The tenant starts a long job on the node (their own ssh); its pid there."""
    known = key_path.parent / "known_hosts"
    known.write_text(f"[{ssh_node.host}]:{ssh_node.port} {ssh_node.host_key}\n")
    argv = [
        "ssh", "-i", str(key_path), "-p", str(ssh_node.port), "-o", f"UserKnownHostsFile={known}",
        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        f"{account}@{ssh_node.host}", "nohup sleep 4321 >/dev/null 2>&1 &",
    ]  # fmt: skip
    subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)


def settled(read):
    """What `read()` gives twice in a row, a moment apart (None while it changes or is empty)."""
    first = read()
    time.sleep(0.3)
    return first if first and read() == first else None


FAULTS = [
    ("a card missing", {"nvidia_smi": board(cards=1)}, "cards: 1 of 2 cards listed"),
    ("an uncorrectable ECC error", {"nvidia_smi": board(volatile=1)}, "ecc: GPU 1: 1 uncorrectable ECC errors"),
    ("an NVLink link down", {"nvidia_smi": board(link_down=True)}, "nvlink: 1 of 36 links down: GPU 0 link 7"),
    ("an XID 79 from NVML", {"xid": 79}, f"xid: XID 79 on {UUIDS[0]} (NVML)"),
]


@pytest.mark.django_db
def test_each_fault_makes_the_rented_node_degraded_tells_both_sides_once_and_a_pass_gives_the_downtime_back(
    rented, ssh_node, sandbox_sshd, customer_key, django_capture_on_commit_callbacks
):
    order, capture = rented, django_capture_on_commit_callbacks
    grant = AccessGrant.objects.get(order=order)
    tenant_process(ssh_node, customer_key[0], grant.account)
    # The job starts in the background of the tenant's session: it may show, alone, a moment after ssh returns.
    tenant = wait_until(
        lambda: settled(lambda: node_processes(sandbox_sshd, "sleep 4321")), seconds=10, what="the tenant's job starts"
    )

    # Given a healthy rented node: a probe finds nothing and changes nothing
    row = probe(ssh_node, capture)
    assert (row.reachable, row.healthy, ssh_node.state) == (True, True, NodeState.IN_USE)
    assert {item["check"] for item in row.findings} >= {"reachable", "cards", "ecc", "nvlink", "xid", "disk"}
    assert mail.outbox == []

    for name, fault, words in FAULTS:
        # When the node shows the fault, and is probed twice in a row
        nvidia_smi = fault.get("nvidia_smi", board())
        node_tools(sandbox_sshd, nvidia_smi=nvidia_smi, dmesg=kernel_log())
        if "xid" in fault:
            xid_events(sandbox_sshd, fault["xid"])
        first = probe(ssh_node, capture)
        if "xid" in fault:  # the card keeps failing: a new XID by the next probe (the old one is not read again)
            time.sleep(1.1)
            xid_events(sandbox_sshd, fault["xid"])
        second = probe(ssh_node, capture)

        # Then it is degraded, says why, and the operators and the customer were told once each
        assert not first.healthy and not second.healthy, name
        assert words in first.summary, (name, first.summary)
        assert ssh_node.state == NodeState.DEGRADED, name
        assert words in ssh_node.state_reason or ssh_node.state_reason.startswith("health probe"), name
        assert (staff_told(ssh_node), sent(order, "a node needs attention")) == (1, 1), name
        body = client_order_health(order)
        assert body["healthy"] is False and any(words.split(": ", 1)[1][:20] in p for p in body["problems"]), name

        # When the fault is gone 30 minutes later (the watcher's log still holds the old XIDs: the cursor skips them)
        earlier(ssh_node, 30)
        ends_before = order.ends_at
        node_tools(sandbox_sshd, nvidia_smi=board(), dmesg=kernel_log())
        time.sleep(1.1)  # the last event was logged a second ahead
        passed = probe(ssh_node, capture)
        assert [i["status"] for i in passed.findings if i["check"] == "xid"] == ["pass"], name

        # Then the node is in use again, the downtime was credited and the customer told how much
        assert passed.healthy, (name, passed.findings)
        assert ssh_node.state == NodeState.IN_USE, name
        credit = RentalCredit.objects.filter(order=order, kind=CreditKind.DOWNTIME).latest("created_at")
        assert credit.seconds >= 30 * 60, name
        order.refresh_from_db()
        assert order.ends_at == ends_before + dt.timedelta(seconds=credit.seconds), name
        assert sent(order, "your node works again") == 1, name
        recovered = next(m for m in mail.outbox if "your node works again" in m.subject)
        assert f"{-(-credit.seconds // 60)} minutes were added to your rental" in recovered.body, name
        mail.outbox.clear()

    # And the tenant's job ran through every probe untouched
    assert node_processes(sandbox_sshd, "sleep 4321") == tenant
    for pid in tenant:
        os.kill(pid, signal.SIGKILL)


def client_order_health(order) -> dict:
    from django.test import Client

    body = Client().get(f"/api/v1/orders/{order.reference}/", HTTP_X_ORDER_TOKEN=order.access_token).json()
    assert len(body["nodes_health"]) == 1
    return body["nodes_health"][0]


@pytest.mark.django_db
def test_an_unreachable_rented_node_is_degraded_once_and_recovers_when_it_answers_again(
    rented, ssh_node, sandbox_sshd, django_capture_on_commit_callbacks
):
    order, capture = rented, django_capture_on_commit_callbacks
    # Given a rented node whose sshd goes down
    sandbox_sshd.halt()
    try:
        # When it is probed twice
        first, second = probe(ssh_node, capture), probe(ssh_node, capture)
    finally:
        sandbox_sshd.restart()

    # Then it is degraded, unreachable, and both sides were told once
    assert (first.reachable, first.healthy, second.reachable) == (False, False, False)
    assert "reachable: not reachable" in first.summary
    assert ssh_node.state == NodeState.DEGRADED
    assert (staff_told(ssh_node), sent(order, "a node needs attention")) == (1, 1)

    # When it answers again an hour later
    earlier(ssh_node, 60)
    ends_before = order.ends_at
    passed = probe(ssh_node, capture)

    # Then it is in use again, but the hour waits on a person: a tenant's own programs can make a node stop
    # answering (memory, processes), and it kept the node meanwhile (issue 39)
    assert passed.healthy and ssh_node.state == NodeState.IN_USE
    assert not RentalCredit.objects.filter(order=order).exists()
    order.refresh_from_db()
    assert order.ends_at == ends_before
    hold = DowntimeHold.objects.get(order=order, node=ssh_node)
    assert hold.decision == "" and "reachable: not reachable" in hold.causes
    assert sent(order, "your node works again") == 1
    recovered = next(m for m in mail.outbox if "your node works again" in m.subject)
    assert "checked by our staff before any time is given back" in recovered.body


def test_a_rented_node_that_accepts_ssh_and_then_hangs_is_degraded_at_the_tools_timeout_and_its_tool_killed(
    rented, ssh_node, sandbox_sshd, django_capture_on_commit_callbacks, monkeypatch
):
    from provisioning import rented_node_health as health

    # Given a rented node that answers SSH but whose Python never returns (a wedged driver, a stuck filesystem)
    monkeypatch.setattr(health, "TOOL_TIMEOUT_SECONDS", 3)
    hang = sandbox_sshd.sandbox / "gpu-tools" / "python-that-hangs"
    hang.write_text("#!/bin/sh\n# FAKE: a node's Python that never answers\nexec sleep 600\n")
    hang.chmod(0o755)
    type(ssh_node).objects.filter(pk=ssh_node.pk).update(python=str(hang))
    ssh_node.refresh_from_db()

    # When it is probed
    started = timezone.now()
    row = probe(ssh_node, django_capture_on_commit_callbacks)

    # Then the probe gives up at the tool's timeout (not the job's lease), the node is degraded, the customer told
    assert (timezone.now() - started).total_seconds() < 30
    assert (row.reachable, row.healthy) == (False, False)
    assert "ran past its 3 s timeout" in row.summary and "killed" in row.summary
    assert ssh_node.state == NodeState.DEGRADED
    assert sent(rented, "a node needs attention") == 1
    # and the hung process was killed on the node, not left behind for the next probe to pile onto
    assert node_processes(sandbox_sshd, "sleep 600") == []


@pytest.mark.django_db
def test_a_healthy_rented_node_stays_in_use_with_no_email_and_beat_queues_one_probe_per_node(
    rented, ssh_node, client, django_capture_on_commit_callbacks
):
    order = rented
    # When beat fans out probes twice in a row (a beat that ran twice)
    with django_capture_on_commit_callbacks(execute=True):
        assert node_health_probes_task() == 1
    assert health_probes_start(now=NodeHealth.objects.get().checked_at) == []

    # Then one probe ran: healthy, the node still in use, nobody emailed
    row = NodeHealth.objects.get(node=ssh_node)
    ssh_node.refresh_from_db()
    assert (row.healthy, row.order_id, ssh_node.state) == (True, order.pk, NodeState.IN_USE)
    assert row.kernel_cursor and row.duration_ms > 0
    assert Job.objects.filter(kind=JobKind.NODE_HEALTH).count() == 1
    assert mail.outbox == []

    # And the order page says so, in the customer's language
    page = client.get(order_status_path(order), headers={"Accept-Language": "en"})
    assert f"Node {ssh_node.name}: healthy, last checked" in page.content.decode()
    page = client.get(order_status_path(order), headers={"Accept-Language": "es"})
    assert f"Nodo {ssh_node.name}: sano, última comprobación el" in page.content.decode()
    body = client_order_health(order)
    assert body["healthy"] is True and body["problems"] == []


@pytest.mark.django_db
def test_a_degraded_node_is_shown_to_operators_and_its_downtime_is_credited_before_the_rental_ends(
    rented, ssh_node, sandbox_sshd, operator, client, settings, django_capture_on_commit_callbacks
):
    order, capture = rented, django_capture_on_commit_callbacks
    # Given a rented node that lost a card 45 minutes ago
    node_tools(sandbox_sshd, nvidia_smi=board(cards=1), dmesg=kernel_log())
    probe(ssh_node, capture)
    earlier(ssh_node, 45)
    assert ssh_node.state == NodeState.DEGRADED

    # Then the console lists it with its latest probe, under "Needs attention" too
    client.force_login(operator)
    console = client.get("/ops/").content.decode()
    assert "Degraded rented nodes" in console and "cards: 1 of 2 cards listed" in console
    assert console.count(ssh_node.name) >= 3  # needs attention, degraded nodes, the nodes list

    # And /metrics counts it and the age of its newest probe
    settings.METRICS_TOKEN = ""
    metrics = client.get("/metrics").content.decode()
    assert 'provisioning_nodes{state="degraded"} 1.0' in metrics
    assert f'provisioning_node_health_age_seconds{{node="{ssh_node.name}"}}' in metrics
    assert "provisioning_node_health_interval_seconds 300.0" in metrics

    # When the rental's end comes while it is still degraded
    past = timezone.now() - dt.timedelta(seconds=1)
    AccessGrant.objects.filter(order=order).update(ends_at=past)
    type(order).objects.filter(pk=order.pk).update(ends_at=past)
    with capture(execute=True):
        access_revoke_due_task()

    # Then the downtime up to the end was given back first: the rental runs 45 minutes longer, nothing revoked
    credit = RentalCredit.objects.get(order=order, kind=CreditKind.DOWNTIME)
    assert 45 * 60 - 5 <= credit.seconds <= 45 * 60 + 60
    order.refresh_from_db()
    grant = AccessGrant.objects.get(order=order)
    assert order.ends_at == past + dt.timedelta(seconds=credit.seconds) == grant.ends_at
    assert grant.revoked_at is None and order.status == OrderStatus.ACTIVE

    # And when the new end comes, the episode is not credited twice
    AccessGrant.objects.filter(order=order).update(ends_at=past)
    type(order).objects.filter(pk=order.pk).update(ends_at=past)
    downtime_close_due(timezone.now())
    assert RentalCredit.objects.filter(order=order).count() == 1
    order.refresh_from_db()
    assert order.ends_at == past


@pytest.mark.django_db
def test_a_node_reached_with_a_login_that_is_not_root_is_probed_all_the_same(
    rented, ssh_node, sandbox_sshd, django_capture_on_commit_callbacks
):
    # Given a rented node whose operator login is not root and may run nothing as root
    user = sandbox_sshd.add_sudo_operator("# the health probe needs no root command")
    # The system Python (the tool needs no more); /home, which the namespace shows (the test's folders are root's)
    type(ssh_node).objects.filter(pk=ssh_node.pk).update(user=user, python="python3", accounts_root="")
    ssh_node.refresh_from_db()

    # When it is probed
    row = probe(ssh_node, django_capture_on_commit_callbacks)

    # Then the tool ran with that login: the cards, the links and the disks were read, and the node is healthy
    found = {item["check"]: item["status"] for item in row.findings}
    assert row.healthy and (found["cards"], found["nvlink"], found["disk"]) == ("pass", "pass", "pass"), row.findings
    assert ssh_node.state == NodeState.IN_USE


@pytest.mark.django_db
def test_an_xid_seen_only_in_the_kernel_log_gives_time_back_only_when_an_operator_decides_so(
    rented, ssh_node, sandbox_sshd, operator, reviewer, client, django_capture_on_commit_callbacks
):
    order, capture = rented, django_capture_on_commit_callbacks
    # Given a rented node without the XID watcher's log, whose kernel log shows an XID 79 record (which a tenant's
    # own program may have brought about: the kernel log is text, NVML's event is the driver's word)
    xid_log(sandbox_sshd).unlink()
    node_tools(sandbox_sshd, nvidia_smi=board(), dmesg=kernel_log(uptime() + 1))
    failing = probe(ssh_node, capture)
    assert "xid_kernel_log: XID 79 on 0000:1b:00" in failing.summary and ssh_node.state == NodeState.DEGRADED

    # When it passes again 40 minutes later
    earlier(ssh_node, 40)
    ends_before = order.ends_at
    probe(ssh_node, capture)

    # Then no time is given back yet; the customer is told a person checks it; the operators see it to decide
    order.refresh_from_db()
    assert ssh_node.state == NodeState.IN_USE and order.ends_at == ends_before
    hold = DowntimeHold.objects.get(order=order)
    recovered = next(m for m in mail.outbox if "your node works again" in m.subject)
    assert "checked by our staff before any time is given back" in recovered.body
    assert any(OPS in m.to and "downtime to decide" in m.subject for m in mail.outbox)
    client.force_login(operator)
    console = client.get("/ops/").content.decode()
    assert "Downtime to decide" in console and "Give the time back" in console
    mail.outbox.clear()

    # When a reviewer tries to decide, then the operator gives the time back, then someone decides again
    client.force_login(reviewer)
    denied = client.post(f"/ops/downtime/{hold.pk}/decide/", {"decision": "credit"})
    client.force_login(operator)
    with capture(execute=True):
        given = client.post(f"/ops/downtime/{hold.pk}/decide/", {"decision": "credit"})
    again = client.post(f"/ops/downtime/{hold.pk}/decide/", {"decision": "decline"}, follow=True)

    # Then only the operator's decision counts, once: about 40 minutes are added, the customer is told why
    assert denied.status_code == 403 and given.status_code == 302
    hold.refresh_from_db()
    assert (hold.decision, hold.decided_by) == ("credited", operator.username)
    assert hold.credit.seconds >= 40 * 60 and hold.credit.actor == operator.username
    order.refresh_from_db()
    assert order.ends_at == ends_before + dt.timedelta(seconds=hold.credit.seconds)
    assert "credited by olga already" in again.content.decode()
    (told,) = [m for m in mail.outbox if order.email in m.to]
    assert "Our staff added" in told.body and "downtime of" in told.body
    assert "Downtime to decide" in client.get("/ops/").content.decode()  # the heading stays; the item is gone
    assert not DowntimeHold.objects.filter(decision="").exists()

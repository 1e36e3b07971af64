"""A rental moved from a degraded node to a spare one, over two real sshds and the development (CPU) preflight:
the spare is prepared with the order's preparation, the tenant's checkpoints in home and scratch are copied node
to node (links and hostile names never followed), the customer's key works on the spare, the manifest's new
revision names both nodes, and the old node gets the clean end of rental. An unreachable old node: nothing is
copied, the customer is told so, and the old node keeps the files (tests/provisioning/flow/test_node_move_kept.py).
No spare free (or the spare fails its preflight): the customer is told, staff see it under "Needs attention". A
second move of a node while one is open is refused."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from io import StringIO

import pytest
from django.core import mail
from django.core.management import CommandError, call_command
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from orders.models import OrderStatus
from provisioning import move_copy as move_copy_module
from provisioning import node_tools
from provisioning.access import KEY_BACKSTOP, access_grant_on_node, account_name
from provisioning.bundle import node_bundle
from provisioning.drivers import driver_for
from provisioning.drivers.ssh import SSHDriver
from provisioning.manifest import manifest_verify
from provisioning.models import AccessGrant, Manifest, MoveStatus, NodeMove, NodeState, PreparationRun
from provisioning.move_copy import move_copy
from provisioning.node_tools.access import account_expiry_day
from provisioning.states import node_state_set
from shop.ops_attention import needs_attention
from tests.provisioning.flow.node_faults import prepare
from tests.sshd import SCRATCH, uid_floor

MOVE = "/api/v1/nodes/{}/move/"
BUTTON = "/ops/nodes/{}/move/"


def uids_apart(server) -> None:
    """The two sandboxes share this machine's /tmp, which the end of rental sweeps for the account's uid: node-a
    numbers its accounts apart from the suite's sandbox, as two real nodes' files never meet."""
    spacer = uid_floor() + 1_000
    for name, line in (
        ("passwd", f"move-spacer:x:{spacer}:{spacer}::/nonexistent:/usr/sbin/nologin"),
        ("group", f"move-spacer:x:{spacer}:"),
    ):
        with open(server.etc(name), "a") as handle:
            handle.write(line + "\n")


def rented(node_on, server, paid_order, fast_preparation, client, operator, capture):
    """An active order on node-a (the server's)."""
    uids_apart(server)
    node_a = node_on(server, "node-a", scratch_paths=f"{SCRATCH}\n")
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, capture)
    assert order.status == OrderStatus.ACTIVE, [event.reason for event in order.events.all()]
    return order, node_a


def degrade(node) -> None:
    node_state_set(node_id=node.pk, to=NodeState.DEGRADED, actor="system", reason="health probe: a card is missing")
    node.refresh_from_db()


def tenant(server, account: str, customer_key) -> SSHDriver:
    return SSHDriver(
        host=server.host, port=server.port, user=account, host_key=server.host_key, key_file=str(customer_key[0])
    )


def as_tenant(server, account: str, customer_key, script: str) -> str:
    with tenant(server, account, customer_key) as session:
        result = session.run(["sh", "-c", script], timeout=60)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def as_root(node, script: str) -> str:
    with driver_for(node) as driver:
        result = driver.run(["sh", "-c", script], timeout=60)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def move_requested(client, node, capture, *, execute: bool = True):
    with capture(execute=execute) as callbacks:
        response = client.post(MOVE.format(node.name))
    return response, callbacks


@pytest.mark.django_db
def test_a_move_copies_the_checkpoints_and_hands_over_a_working_key_on_the_spare(
    private_sshd,
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    customer_key,
    operator,
    client,
    django_capture_on_commit_callbacks,
):
    capture = django_capture_on_commit_callbacks
    # Given an active rental on node-a, whose tenant saved a checkpoint in their home and one in scratch, next to a
    # link to the node's password file, a link to /, and a file whose name holds a newline
    order, node_a = rented(node_on, private_sshd, paid_order, fast_preparation, client, operator, capture)
    node_b = node_on(sandbox_sshd, "node-b", scratch_paths=f"{SCRATCH}\n")
    account = account_name(order)
    as_tenant(
        private_sshd,
        account,
        customer_key,
        (
            f"cd ~ && mkdir -p ckpt && head -c 3000000 /dev/urandom > ckpt/step-100.pt && ln -s /etc/shadow shadow-link"
            f" && ln -s / rootfs && printf evil > \"$(printf 'evil\\nname')\""
            f" && head -c 70000 /dev/urandom > {SCRATCH}/{account}-opt.pt"
        ),
    )
    checkpoint = (private_sshd.home(account) / "ckpt" / "step-100.pt").read_bytes()
    scratch_sum = as_root(node_a, f"sha256sum {SCRATCH}/{account}-opt.pt").split()[0]
    ends_before = order.ends_at
    degrade(node_a)
    client.force_login(operator)
    assert "Move to a spare node" in client.get("/ops/").content.decode()

    # When an operator moves the rental (the API), and asks again while the move is open
    response, pending = move_requested(client, node_a, capture, execute=False)
    assert response.status_code == 202, response.content
    assert (response.json()["status"], response.json()["to_node"]) == ("preparing", "node-b")
    again = client.post(MOVE.format(node_a.name))
    console = client.get("/ops/").content.decode()
    with pytest.raises(CommandError, match="already open"):
        call_command("node_move", "node-a", stdout=StringIO())
    with capture(execute=True):
        for callback in pending:
            callback()

    # Then the second request was refused in words, and the console showed the open move
    assert again.status_code == 409 and "already open" in again.json()["detail"]
    assert "node-a &rarr; node-b" in console and "preparing the spare node" in console
    move = NodeMove.objects.get(order=order)
    assert move.status == MoveStatus.DONE, (move.error, move.copy_report)
    # And both checkpoints are on node-b with the same bytes, the account's; the links and their targets are not
    home_b = sandbox_sshd.home(account)
    assert (home_b / "ckpt" / "step-100.pt").read_bytes() == checkpoint
    assert as_root(node_b, f"sha256sum {SCRATCH}/{account}-opt.pt").split()[0] == scratch_sum
    uid = int(sandbox_sshd.entry("passwd", account)[2])
    assert (home_b / "ckpt" / "step-100.pt").stat().st_uid == uid
    assert as_root(node_b, f"stat -c %u {SCRATCH}/{account}-opt.pt").strip() == str(uid)
    assert (home_b / "evil\nname").read_bytes() == b"evil"
    assert not os.path.lexists(home_b / "shadow-link") and not os.path.lexists(home_b / "rootfs")
    copied = {(item["where"], item["path"]) for item in move.copy_report["copied"]}
    assert {("home", "ckpt/step-100.pt"), (SCRATCH, f"{account}-opt.pt"), ("home", "evil\nname")} <= copied
    not_copied = {item["path"]: item["why"] for item in move.copy_report["not_copied"]}
    assert not_copied == {"shadow-link": "a symbolic link (not followed)", "rootfs": "a symbolic link (not followed)"}
    # And the customer's key logs in on node-b and reads the checkpoint there
    assert as_tenant(sandbox_sshd, account, customer_key, "sha256sum ~/ckpt/step-100.pt").split()[0] == (
        hashlib.sha256(checkpoint).hexdigest()
    )
    # And the manifest's latest revision names the move and both nodes, and verifies
    manifest = Manifest.objects.get(order=order)
    (change,) = [change for change in manifest.body["changes"] if change["kind"] == "node_move"]
    assert (change["kind"], change["from_node"], change["to_node"]) == ("node_move", "node-a", "node-b")
    assert "home:ckpt/step-100.pt" in change["copied"]
    assert [node["name"] for node in manifest.body["nodes"]] == ["node-b"]
    assert manifest_verify(manifest.body, manifest.signature, manifest.public_key)
    # And node-a got the clean end of rental: the account is gone and the node is failed for the operators
    node_a.refresh_from_db()
    node_b.refresh_from_db()
    assert private_sshd.entry("passwd", account) is None
    assert (node_a.state, node_b.state) == (NodeState.FAILED, NodeState.IN_USE)
    # And the rental goes on: active, its end the old one plus the credited downtime, the new grant ending with it
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE and order.ends_at >= ends_before
    grant = AccessGrant.objects.handed_over().get(order=order)
    assert (grant.node, grant.ends_at) == (node_b, order.ends_at)
    # And the customer was told the new access and what was copied
    moved = [message for message in mail.outbox if "moved to another node" in message.subject]
    assert len(moved) == 1
    assert grant.ssh_command in moved[0].body and "ckpt/step-100.pt" in moved[0].body
    assert "shadow-link (a symbolic link (not followed))" in moved[0].body

    # And the node tool refuses a path that climbs out of the home, or runs through a link the tenant made
    as_tenant(sandbox_sshd, account, customer_key, "ln -s /etc ~/etc-link")
    tool = [node_b.python, "move_files.py", "write", "--account", account, "--root", "home"]
    with driver_for(node_b) as driver:
        driver.put_file(node_tools.source("move_files.py"), "move_files.py")
        driver.put_file(b"owned", "chunk")
        prefix = ["--users-prefix", node_b.accounts_root, "--from", "chunk", "--last", "--size", "5"]
        climbing = driver.run([*tool, "--path", "../../etc/evil", *prefix], timeout=60)
        linked = driver.run([*tool, "--path", "etc-link/evil", *prefix], timeout=60)
    assert climbing.exit_code == 1 and "not a relative path of plain names" in climbing.stderr
    assert linked.exit_code == 1 and "etc-link is not a folder" in linked.stderr
    assert as_root(node_b, "ls /etc/evil 2>/dev/null || echo absent").strip() == "absent"


@pytest.mark.django_db
def test_a_move_from_an_unreachable_node_copies_nothing_says_so_and_keeps_the_old_node_out_of_sale(
    private_sshd,
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    customer_key,
    operator,
    client,
    django_capture_on_commit_callbacks,
):
    capture = django_capture_on_commit_callbacks
    # Given an active rental on node-a, which then stops answering
    order, node_a = rented(node_on, private_sshd, paid_order, fast_preparation, client, operator, capture)
    node_b = node_on(sandbox_sshd, "node-b", scratch_paths=f"{SCRATCH}\n")
    degrade(node_a)
    private_sshd.halt()

    # When an operator moves the rental (manage.py)
    out = StringIO()
    with capture(execute=True):
        call_command("node_move", "node-a", "--actor", "olga", stdout=out)

    # Then the rental is on node-b, where the customer's key logs in; nothing was copied, and the report says why
    assert "to node-b" in out.getvalue()
    move = NodeMove.objects.get(order=order)
    assert move.status == MoveStatus.DONE and move.requested_by == "olga"
    assert move.copy_report["reachable"] is False and move.copy_report["copied"] == []
    assert "could not be reached: nothing was copied" in move.copy_report["summary"]
    assert as_tenant(sandbox_sshd, account_name(order), customer_key, "whoami").strip() == account_name(order)
    moved = [message for message in mail.outbox if "moved to another node" in message.subject]
    assert len(moved) == 1 and "could not be reached, so none of your files could be copied" in moved[0].body
    assert "stay on your old node (node-a) until your rental ends" in moved[0].body
    # And node-a keeps its grant and the tenant's files, out of sale: nothing wipes them when it answers again
    # (issue 39); the job that stops the tenant there and opens read-only SFTP waits for it to answer
    node_a.refresh_from_db()
    node_b.refresh_from_db()
    assert (node_a.state, node_b.state) == (NodeState.DEGRADED, NodeState.IN_USE)
    assert AccessGrant.objects.handed_over().filter(order=order, node=node_a).exists()
    assert move.old_files_kept_at is not None
    assert not Job.objects.filter(kind=JobKind.NODE_MOVE_REVOKE).exists()
    assert Job.objects.get(kind=JobKind.ACCESS_GRACE).done_at is None
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE


@pytest.mark.django_db
def test_with_no_working_spare_the_move_waits_the_customer_is_told_and_staff_see_it(
    private_sshd,
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    operator,
    client,
    django_capture_on_commit_callbacks,
):
    capture = django_capture_on_commit_callbacks
    # Given an active rental on node-a of a customer who reads French, and one free node whose preflight cannot run
    # (its Python is gone)
    order, node_a = rented(node_on, private_sshd, paid_order, fast_preparation, client, operator, capture)
    type(order).objects.filter(pk=order.pk).update(language="fr")
    healthy = client.post(MOVE.format(node_a.name))
    node_b = node_on(sandbox_sshd, "node-b", python="/nonexistent/python3")
    degrade(node_a)
    mail.outbox.clear()

    # When an operator moves the rental (the console's button)
    with capture(execute=True):
        response = client.post(BUTTON.format(node_a.name))

    # Then a healthy node's rental was never moved, and now: node-b failed its preflight and is set aside with the
    # reason, no other node is free, and the move ends `no_node`
    assert healthy.status_code == 409 and "only a degraded or failed node" in healthy.json()["detail"]
    assert response.status_code == 302
    move = NodeMove.objects.get(order=order)
    assert move.status == MoveStatus.NO_NODE and move.to_node == node_b
    node_b.refresh_from_db()
    assert node_b.state == NodeState.FAILED and "/nonexistent/python3" in node_b.state_reason
    assert not AccessGrant.objects.filter(order=order, node=node_b, revoked_at__isnull=True).exists()
    # And the customer is told, in their language, that no spare is free yet, and the rental stays where it is
    assert [message.subject for message in mail.outbox] == [
        f"Commande {order.reference} : aucun nœud de réserve n'est encore libre"
    ]
    assert "Nos opérateurs sont prévenus" in mail.outbox[0].body
    order.refresh_from_db()
    node_a.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE and node_a.state == NodeState.DEGRADED
    # And staff see the rental to move under "Needs attention", and the console offers the move again
    waiting = [item for item in needs_attention() if item.kind == "move"]
    assert [(item.title, item.link) for item in waiting] == [(order.reference, "/ops/#moves-title")]
    console = client.get("/ops/").content.decode()
    assert "Rental to move" in console and "Move to a spare node" in console


def account_on_two_nodes(old_server, new_server, node_on, paid_order, scratch: str = ""):
    """A paid order's account on node-a (the old node, `old_server`) and node-b: (node-a's grant, node-b, the
    account), as a move finds them before its copy."""
    uids_apart(old_server)
    scratch_paths = f"{scratch}\n" if scratch else ""
    node_a = node_on(old_server, "node-a", scratch_paths=scratch_paths)
    node_b = node_on(new_server, "node-b", scratch_paths=scratch_paths)
    order = paid_order()
    grant_a = granted_on(node_a, order)
    granted_on(node_b, order)
    return grant_a, node_b, account_name(order)


def granted_on(node, order):
    """The order's account on the node, as the preparation's grant step makes it (without the preflight)."""
    run_ = PreparationRun.objects.create(order=order, node=node, requested_by="olga")
    with driver_for(node) as driver:
        driver.put_file(node_bundle(), f"{driver.workdir}/bundle.tar.gz")
        assert driver.run(["tar", "-xzf", "bundle.tar.gz", "-C", driver.workdir], timeout=60).exit_code == 0
        return access_grant_on_node(driver=driver, run=run_)


@pytest.mark.django_db
def test_the_copy_keeps_to_its_size_limit_and_a_copy_run_again_skips_what_the_spare_holds(
    private_sshd, sandbox_sshd, node_on, paid_order, customer_key, settings, monkeypatch
):
    # Given the order's account on two nodes, and two checkpoints in its home on node-a (one of several chunks)
    grant_a, node_b, account = account_on_two_nodes(private_sshd, sandbox_sshd, node_on, paid_order, SCRATCH)
    as_tenant(
        private_sshd,
        account,
        customer_key,
        "cd ~ && head -c 2500000 /dev/urandom > big.pt && head -c 1000 /dev/urandom > small.pt",
    )
    monkeypatch.setattr(move_copy_module, "CHUNK_BYTES", 1 << 20)

    # When the copy may move no byte (MOVE_COPY_MAX_GIB 0)
    settings.MOVE_COPY_MAX_GIB = 0
    bounded = move_copy(old_grant=grant_a, new_node=node_b)

    # Then nothing is copied, and each file says why
    assert bounded["copied"] == [] and bounded["bytes_copied"] == 0
    assert {item["path"]: item["why"] for item in bounded["not_copied"]} == {
        "big.pt": "over the copy's limit of 0 GiB (MOVE_COPY_MAX_GIB)",
        "small.pt": "over the copy's limit of 0 GiB (MOVE_COPY_MAX_GIB)",
    }

    # When it may, then runs again (a job delivered twice)
    settings.MOVE_COPY_MAX_GIB = 1
    first = move_copy(old_grant=grant_a, new_node=node_b)
    again = move_copy(old_grant=grant_a, new_node=node_b)

    # Then the first copied both files with the same bytes, and the second found them there and moved nothing
    assert (first["bytes_copied"], first["already_there"], first["not_copied"]) == (2_501_000, 0, [])
    home_a, home_b = private_sshd.home(account), sandbox_sshd.home(account)
    for name in ("big.pt", "small.pt"):
        assert (home_b / name).read_bytes() == (home_a / name).read_bytes()
    assert (again["bytes_copied"], again["already_there"], len(again["copied"])) == (0, 2, 2)
    assert not [path.name for path in home_b.iterdir() if path.name.startswith(".b200-move-partial-")]


@pytest.mark.django_db
def test_the_spares_key_and_account_expire_with_the_rental_not_a_new_one(sandbox_sshd, node_on, paid_order):
    # Given a 7-day rental on node-a with two days left, moved: its spare gets the account and key by the
    # preparation's grant
    node_on(sandbox_sshd, "node-a")
    order = paid_order()
    ends_at = timezone.now().replace(second=0, microsecond=0) + dt.timedelta(days=2)
    active = {"status": OrderStatus.ACTIVE, "active_since": timezone.now(), "ends_at": ends_at}
    type(order).objects.filter(pk=order.pk).update(**active)
    order.refresh_from_db()
    spare = node_on(sandbox_sshd, "node-b")

    granted_on(spare, order)

    # Then the key and the account end with the rental plus the one-day backstop (before: a whole new rental's
    # 7 days from the move)
    backstop = ends_at + KEY_BACKSTOP
    account = account_name(order)
    key_line = (sandbox_sshd.home(account) / ".ssh" / "authorized_keys").read_text()
    assert key_line.startswith(f'expiry-time="{backstop:%Y%m%d%H%M}Z" ')
    expires_day = (dt.date(1970, 1, 1) + dt.timedelta(days=int(sandbox_sshd.entry("shadow", account)[7]))).isoformat()
    assert expires_day == account_expiry_day(backstop)
    assert AccessGrant.objects.get(order=order, node=spare).ends_at == ends_at


@pytest.mark.django_db
def test_a_file_named_like_an_option_is_copied_and_stops_no_other_file(
    private_sshd, sandbox_sshd, node_on, paid_order, customer_key
):
    # Given the order's account on two nodes, with a top-level file named "-notes.txt" (sorted first), one named
    # "--root=x" and a checkpoint after them
    grant_a, node_b, account = account_on_two_nodes(private_sshd, sandbox_sshd, node_on, paid_order)
    as_tenant(
        private_sshd,
        account,
        customer_key,
        "cd ~ && printf notes > ./-notes.txt && printf x > ./--root=x && head -c 5000 /dev/urandom > ckpt.pt",
    )

    # When the files are copied for a move
    report = move_copy(old_grant=grant_a, new_node=node_b)

    # Then every file arrived with its bytes, and the old node was never taken for lost (before: "-notes.txt" was
    # read as an option, the tool's usage error taken for a lost node, and no file after it copied)
    home_a, home_b = private_sshd.home(account), sandbox_sshd.home(account)
    assert report["error"] == "" and report["not_copied"] == [], report
    for name in ("-notes.txt", "--root=x", "ckpt.pt"):
        assert (home_b / name).read_bytes() == (home_a / name).read_bytes()

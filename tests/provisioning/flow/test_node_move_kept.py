"""A move that cannot copy everything never loses the tenant's files (issue 39, item 7): the listing reads no file
(a sparse file of terabytes lists at once and is left out by the size limit, the rest copied), each file is hashed
as it passes and one that changes meanwhile is not copied, the size and time limits apply while listing; and when
files are left behind, the old node keeps them read-only for the customer, who is told, until a person releases
them from the console (or the rental ends). Over two real sshds, tenants under their own uids."""

from __future__ import annotations

import json

import pytest
from django.core import mail

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from provisioning import move_copy as move_copy_module
from provisioning import node_tools
from provisioning.access import account_name
from provisioning.drivers import driver_for
from provisioning.models import AccessGrant, MoveStatus, NodeMove, NodeState
from provisioning.move_copy import move_copy
from shop.ops_attention import needs_attention
from tests.provisioning.flow.test_data_grace import ssh_command
from tests.provisioning.flow.test_fault_preflight_timeout import alive
from tests.provisioning.flow.test_node_move import (
    account_on_two_nodes,
    as_tenant,
    degrade,
    move_requested,
    rented,
)
from tests.sshd import SCRATCH
from tests.staff import add_staff

RELEASE = "/ops/moves/{}/release/"


@pytest.mark.django_db
def test_files_the_copy_left_behind_stay_on_the_old_node_until_a_person_releases_them(
    private_sshd,
    sandbox_sshd,
    node_on,
    fast_preparation,
    paid_order,
    customer_key,
    operator,
    client,
    settings,
    django_capture_on_commit_callbacks,
):
    capture = django_capture_on_commit_callbacks
    # Given an active rental on node-a whose tenant saved a checkpoint and left a job running, and a copy that may
    # move no byte (MOVE_COPY_MAX_GIB 0: a home bigger than the limit)
    order, node_a = rented(node_on, private_sshd, paid_order, fast_preparation, client, operator, capture)
    node_on(sandbox_sshd, "node-b", scratch_paths=f"{SCRATCH}\n")
    account = account_name(order)
    as_tenant(private_sshd, account, customer_key, "head -c 200000 /dev/urandom > ~/ckpt.pt")
    job = as_tenant(private_sshd, account, customer_key, "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
    checkpoint = (private_sshd.home(account) / "ckpt.pt").read_bytes()
    settings.MOVE_COPY_MAX_GIB = 0
    degrade(node_a)
    mail.outbox.clear()

    # When an operator moves the rental
    response, _ = move_requested(client, node_a, capture)

    # Then the rental is on node-b, and node-a keeps the account and its files (before: its clean end of rental
    # wiped the home with nothing copied)
    assert response.status_code == 202, response.content
    move = NodeMove.objects.get(order=order)
    assert move.status == MoveStatus.DONE and move.old_files_kept_at is not None
    assert move.copy_report["complete"] is False
    assert (private_sshd.home(account) / "ckpt.pt").read_bytes() == checkpoint
    assert not Job.objects.filter(kind=JobKind.NODE_MOVE_REVOKE).exists()
    # (and when the move started, the tenant there was told, so that it could save its work: issue 41)
    notice = json.loads((private_sshd.home(account) / ".b200" / "notice.json").read_text())
    assert notice["reason"] == "move" and notice["seconds_left"] > 0
    # And there the tenant is stopped, and its key reads the files over SFTP only, until the rental's end
    old_grant = AccessGrant.objects.handed_over().get(order=order, node=node_a)
    order.refresh_from_db()
    assert old_grant.grace_until >= order.ends_at
    assert not alive(int(job))
    assert 'restrict,command="' in private_sshd.held_key(account).read_text()
    tried = ssh_command(private_sshd, customer_key[0], account, "id")
    assert "uid=" not in tried.stdout, tried.stdout
    # And the customer is told which files stayed, where, and how to fetch them
    (moved,) = [message for message in mail.outbox if "moved to another node" in message.subject]
    assert "home: ckpt.pt (over the copy's limit of 0 GiB (MOVE_COPY_MAX_GIB))" in moved.body
    assert f"stay on your old node ({node_a.name}) until your rental ends" in moved.body
    assert old_grant.sftp_command in moved.body and "being cleaned" not in moved.body
    # And staff see it, with the button that releases the files
    kept = [item for item in needs_attention() if item.kind == "move_files"]
    assert [(item.title, item.link) for item in kept] == [(order.reference, "/ops/#moves-title")]
    console = client.get("/ops/").content.decode()
    assert f"Release the files on {node_a.name}" in console

    # When a reviewer (no operator) tries to release them, then an operator does, twice
    client.force_login(add_staff("rita", "reviewer"))
    denied = client.post(RELEASE.format(move.pk)).status_code
    client.force_login(operator)
    with capture(execute=True):
        released = client.post(RELEASE.format(move.pk))
    again = client.post(RELEASE.format(move.pk), follow=True)

    # Then only the operator's release counts, once: the old node's clean end of rental ran, recording who decided
    assert denied == 403 and released.status_code == 302
    assert "nothing to release" in again.content.decode()
    move.refresh_from_db()
    assert move.old_files_released_by == operator.username and move.old_files_released_at is not None
    assert private_sshd.entry("passwd", account) is None and not private_sshd.home(account).exists()
    assert not [item for item in needs_attention() if item.kind == "move_files"]
    node_a.refresh_from_db()
    assert node_a.state in (NodeState.DEGRADED, NodeState.FAILED)


@pytest.mark.django_db
def test_a_sparse_file_of_terabytes_is_listed_without_reading_it_and_the_rest_is_copied(
    private_sshd, sandbox_sshd, node_on, paid_order, customer_key, settings
):
    # Given the order's account on two nodes, with a sparse file of 2 TiB (a few kB on disk) next to a checkpoint
    grant_a, node_b, account = account_on_two_nodes(private_sshd, sandbox_sshd, node_on, paid_order)
    as_tenant(
        private_sshd, account, customer_key, "cd ~ && truncate -s 2T huge.img && head -c 5000 /dev/urandom > ckpt.pt"
    )
    settings.MOVE_COPY_MAX_GIB = 1

    # When the files are copied for a move
    report = move_copy(old_grant=grant_a, new_node=node_b)

    # Then the checkpoint arrived, the sparse file is left out by the size limit without being read (before: the
    # listing hashed its 2 TiB of zeros under one timeout and nothing was copied), and the copy is incomplete
    home_a, home_b = private_sshd.home(account), sandbox_sshd.home(account)
    assert (home_b / "ckpt.pt").read_bytes() == (home_a / "ckpt.pt").read_bytes()
    assert report["not_copied"] == [
        {"where": "home", "path": "huge.img", "why": "over the copy's limit of 1 GiB (MOVE_COPY_MAX_GIB)"}
    ]
    assert report["complete"] is False and not (home_b / "huge.img").exists()


@pytest.mark.django_db
def test_a_file_that_changes_while_it_is_copied_is_not_copied_and_the_others_are(
    private_sshd, sandbox_sshd, node_on, paid_order, customer_key, monkeypatch
):
    # Given the order's account on two nodes with two files, and a tenant who rewrites one of them just after the
    # listing (a training job still saving a checkpoint)
    grant_a, node_b, account = account_on_two_nodes(private_sshd, sandbox_sshd, node_on, paid_order)
    as_tenant(
        private_sshd,
        account,
        customer_key,
        "cd ~ && head -c 3000 /dev/urandom > a.pt && head -c 3000 /dev/urandom > b.pt",
    )
    listed = move_copy_module._list

    def list_then_rewrite(tool, roots, **limits):
        found = listed(tool, roots, **limits)
        if tool.node.pk == grant_a.node_id:
            as_tenant(private_sshd, account, customer_key, "cd ~ && sleep 0.01 && head -c 3000 /dev/urandom > a.pt")
        return found

    monkeypatch.setattr(move_copy_module, "_list", list_then_rewrite)

    # When the files are copied
    report = move_copy(old_grant=grant_a, new_node=node_b)

    # Then the rewritten file is not copied, saying why, and nothing of it is on the spare; the other one is
    assert [(item["path"], item["why"].split(" (")[0]) for item in report["not_copied"]] == [
        ("a.pt", "the file changed while it was copied")
    ]
    home_a, home_b = private_sshd.home(account), sandbox_sshd.home(account)
    assert not (home_b / "a.pt").exists()
    assert (home_b / "b.pt").read_bytes() == (home_a / "b.pt").read_bytes()
    assert report["complete"] is False


@pytest.mark.django_db
def test_the_listing_stops_at_its_time_limit_and_says_where(
    private_sshd, sandbox_sshd, node_on, paid_order, customer_key, settings
):
    # Given the order's account on node-a with a few files
    grant_a, node_b, account = account_on_two_nodes(private_sshd, sandbox_sshd, node_on, paid_order)
    as_tenant(private_sshd, account, customer_key, "cd ~ && mkdir -p d && touch a d/b d/c")

    # When the node tool lists them with no time left, and a copy runs with no time left
    with driver_for(grant_a.node) as driver:
        driver.put_file(node_tools.source("move_files.py"), "move_files.py")
        argv = [
            grant_a.node.python,
            "move_files.py",
            "list",
            "--account",
            account,
            "--root",
            "home",
            "--max-seconds",
            "0",
            "--users-prefix",
            grant_a.node.accounts_root,
        ]
        result = driver.run(argv, timeout=60)
    settings.MOVE_COPY_MAX_MINUTES = 0
    report = move_copy(old_grant=grant_a, new_node=node_b)

    # Then the listing stopped at its first entry and said so; the copy copied nothing, said why, and is incomplete
    assert result.exit_code == 0, result.stderr
    listing = json.loads(result.stdout)
    assert (listing["files"], listing["stopped_at"]) == ([], "home:a")
    assert report["copied"] == [] and report["complete"] is False
    assert "time limit of 0 minutes (MOVE_COPY_MAX_MINUTES) was reached" in report["error"]

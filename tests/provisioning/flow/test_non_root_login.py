"""A node the shop reaches with a non-root login (docs/production.md's `--user shop-ops`): the only thing that login
may run as root is the access tool installed on the node, through the docs' sudo rule, and that is enough
to hand access over and take it back. Run against the real sandboxed sshd, with the sandbox's own sudoers."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from django.utils import timezone

from orders.models import OrderStatus
from provisioning import node_tools
from provisioning.access import access_grant_on_node, access_revoke, account_name
from provisioning.drivers import DriverError, driver_for
from provisioning.drivers.ssh import SSHDriver
from provisioning.models import AccessGrant, PreparationRun
from tests.provisioning.flow.node_faults import prepare
from tests.servers import ROOT, server_missing

DOCS_RULE = re.compile(r"^(shop-ops ALL=\(root\) NOPASSWD: )(/\S+)$", re.MULTILINE)


def docs_sudo_rule() -> tuple[str, str]:
    """The sudoers line docs/production.md ("The nodes' login") tells administrators to add, and the tool path it
    names."""
    match = DOCS_RULE.search((ROOT / "docs" / "production.md").read_text())
    assert match, "docs/production.md gives no sudoers line for the shop's login"
    return match.group(1), match.group(2)


@pytest.fixture
def sudo_node(db, sandbox_sshd, monkeypatch):
    """A node reached as shop-ops, the access tool installed as the docs say, its sudo rule in place."""
    if not Path("/usr/bin/sudo").exists():
        server_missing("sudo (Debian's sudo; .ci/run installs it)")
    monkeypatch.setenv("NODE_SSH_KEY_FILE", str(sandbox_sshd.operator_key_file))
    rule, _docs_path = docs_sudo_rule()
    tool = sandbox_sshd.install_access_tool(node_tools.source("access.py"))
    user = sandbox_sshd.add_sudo_operator(rule + tool)
    node = sandbox_sshd.node(
        name="node-without-root-login", user=user, access_tool=tool, accounts_root=str(sandbox_sshd.sandbox)
    )
    node.save()
    return node


def customer_session(sshd, order, key_path) -> SSHDriver:
    return SSHDriver(
        host=sshd.host, port=sshd.port, user=account_name(order), host_key=sshd.host_key, key_file=str(key_path)
    )


@pytest.mark.django_db
def test_a_non_root_login_hands_access_over_and_takes_it_back_through_the_docs_sudo_rule(
    sudo_node, sandbox_sshd, paid_order, customer_key
):
    # Given a paid order held on a node the shop reaches as shop-ops, which is not root
    order = paid_order()
    run_ = PreparationRun.objects.create(order=order, node=sudo_node, requested_by="olga")
    with driver_for(sudo_node) as driver:
        assert driver.run(["id", "-un"], timeout=30).stdout == "shop-ops\n"

        # When the grant step runs
        grant = access_grant_on_node(driver=driver, run=run_)

    # Then the customer's account exists and the customer logs in with their key
    assert sandbox_sshd.entry("passwd", account_name(order)) is not None
    with customer_session(sandbox_sshd, order, customer_key[0]) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account_name(order)}\n"

    # When the rental ends, an older copy of the tool having been installed meanwhile (access is taken away
    # whatever the copy: only grants insist on the shop's own version)
    sandbox_sshd.install_access_tool(node_tools.source("access.py") + b"\n# an older release\n")
    AccessGrant.objects.filter(pk=grant.pk).update(ends_at=timezone.now() - dt.timedelta(seconds=1))
    assert access_revoke(grant_id=grant.pk) is True

    # Then the account is gone and the key refused
    assert sandbox_sshd.entry("passwd", account_name(order)) is None
    with pytest.raises(DriverError, match="refused the key"):
        customer_session(sandbox_sshd, order, customer_key[0])


@pytest.mark.django_db
def test_the_login_may_run_nothing_else_as_root_nor_point_the_tool_at_a_user_database_it_made(sudo_node, sandbox_sshd):
    with driver_for(sudo_node) as driver:
        # Any other command as root is refused by sudo
        for command in (["id", "-u"], ["sh", "-c", "id -u"], ["python3", sudo_node.access_tool, "--help"]):
            refused = driver.run(["sudo", "-n", *command], timeout=30)
            assert refused.exit_code != 0 and refused.stdout.strip() != "0", (command, refused)

        # And the tool refuses a user database the login wrote itself: its entries could name any uid, whose
        # processes and files a revocation would remove (an unused uid here, should the guard ever fail)
        fake = f"{driver.workdir}/fake"
        entry = "o-victim:x:4000000001:4000000001:b200-shop order access key=x:/home/victim:/bin/sh\n"
        driver.put_file(entry.encode(), f"{fake}/etc/passwd")
        tricked = driver.run(
            ["sudo", "-n", sudo_node.access_tool, "revoke", "--account", "o-victim", "--users-prefix", fake],
            timeout=30,
        )
    assert tricked.exit_code == 1 and "--users-prefix" in tricked.stderr, tricked


@pytest.mark.django_db
def test_an_installed_tool_that_is_not_this_shops_version_stops_the_preparation_before_the_preflight(
    sudo_node, sandbox_sshd, fast_preparation, paid_order, operator, client, django_capture_on_commit_callbacks
):
    # Given the tool on the node is an older (or altered) copy
    sandbox_sshd.install_access_tool(node_tools.source("access.py") + b"\n# an older release\n")
    order = paid_order(preparation=fast_preparation)

    # When the operator prepares the order
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the run stops at once, saying what to do, and no preflight ran on the node
    assert order.status == OrderStatus.PREPARATION_FAILED
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "error" and "not this shop's version" in run_.error, run_.error
    assert "running the GPU preflight" not in run_.log and run_.report is None

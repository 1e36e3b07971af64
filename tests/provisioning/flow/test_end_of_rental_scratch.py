"""The shop's end of rental on the real sandboxed sshd: the node's configured scratch folders travel to the
access tool and are swept, and a node the tool cannot prove clean keeps its tenant's grant (not handed on)
until a retry succeeds."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from provisioning.access import access_grant_on_node, access_revoke, account_name
from provisioning.bundle import node_bundle
from provisioning.drivers import DriverError, driver_for
from provisioning.drivers.ssh import SSHDriver
from provisioning.models import AccessGrant, PreparationRun
from tests.sshd import SCRATCH


def on_node(node, script: str) -> str:
    with driver_for(node) as driver:
        result = driver.run(["sh", "-c", script], timeout=60)
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.mark.django_db
def test_the_rentals_end_sweeps_the_nodes_scratch_folder_and_an_unclean_node_keeps_its_grant_until_a_retry(
    ssh_node, sandbox_sshd, paid_order, customer_key
):
    # Given a node with a scratch folder, a tenant who left files there, one of them under a read-only mount
    ssh_node.scratch_paths = f"{SCRATCH}\n"
    ssh_node.save()
    order = paid_order()
    run_ = PreparationRun.objects.create(order=order, node=ssh_node, requested_by="olga")
    with driver_for(ssh_node) as driver:
        driver.put_file(node_bundle(), f"{driver.workdir}/bundle.tar.gz")  # as the preparation copies it
        assert driver.run(["tar", "-xzf", "bundle.tar.gz", "-C", driver.workdir], timeout=60).exit_code == 0
        grant = access_grant_on_node(driver=driver, run=run_)
    account = account_name(order)
    stuck = f"{SCRATCH}/{account}-stuck"
    session = SSHDriver(
        host=sandbox_sshd.host,
        port=sandbox_sshd.port,
        user=account,
        host_key=sandbox_sshd.host_key,
        key_file=str(customer_key[0]),
    )
    planting = f"mkdir {stuck}; echo w > {stuck}/w; echo c > {SCRATCH}/{account}-c"
    with session:
        left = session.run(["sh", "-c", planting], timeout=30)
    assert left.exit_code == 0, left.stderr
    on_node(ssh_node, f"mount --bind {stuck} {stuck} && mount -o remount,bind,ro {stuck}")
    AccessGrant.objects.filter(pk=grant.pk).update(ends_at=timezone.now() - dt.timedelta(seconds=1))
    state = ssh_node.state

    try:
        # When the rental's end comes and the node cannot be scrubbed clean
        with pytest.raises(DriverError, match="not clean") as failure:
            access_revoke(grant_id=grant.pk)

        # Then the operator reads which file is left, and the grant stays live: the node is not handed on
        assert f"{stuck}/w" in str(failure.value)
        grant.refresh_from_db()
        ssh_node.refresh_from_db()
        assert grant.revoked_at is None and ssh_node.state == state
    finally:
        on_node(ssh_node, f"umount {stuck}")

    # And the retry, once the mount is gone, sweeps the scratch folder and ends the access
    assert access_revoke(grant_id=grant.pk) is True
    assert on_node(ssh_node, f"find {SCRATCH} -name '*{account}*'") == ""
    grant.refresh_from_db()
    assert grant.revoked_at is not None
    assert sandbox_sshd.entry("passwd", account) is None

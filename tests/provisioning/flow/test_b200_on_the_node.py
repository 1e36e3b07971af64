"""`b200` on the rented node (issue 41), through the real hand-over on the sandboxed sshd: the hand-over installs
the command and writes the order's facts, which the tenant reads over its own SSH login (`b200 status --json`
matches the order; the welcome in the order's language), which only root can write, and which go at the end."""

from __future__ import annotations

import datetime as dt
import json
import subprocess

import pytest
from django.utils import timezone

from orders.models import OrderStatus
from provisioning.access import access_revoke
from provisioning.models import AccessGrant
from tests.provisioning.flow.node_faults import prepare

pytestmark = pytest.mark.django_db


def tenant(ssh_node, grant, key_path, tmp_path, command: str) -> subprocess.CompletedProcess:
    """The customer's own ssh, the node's key pinned, running one command as the order's account."""
    known = tmp_path / "known_hosts"
    known.write_text(f"[{ssh_node.host}]:{ssh_node.port} {ssh_node.host_key}\n")
    argv = [
        "ssh", "-i", str(key_path), "-p", str(ssh_node.port), "-o", f"UserKnownHostsFile={known}",
        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        f"{grant.account}@{grant.host}", command,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_the_hand_over_installs_b200_whose_status_matches_the_order_and_the_end_removes_it(
    shared_preflight, tmp_path, ssh_node, sandbox_sshd, fast_preparation, paid_order, operator, client, customer_key,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given a Spanish customer's rental handed over on a node behind a real sshd
    order = paid_order(preparation=fast_preparation)
    type(order).objects.filter(pk=order.pk).update(language="es")
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    order.refresh_from_db()
    assert order.status == OrderStatus.ACTIVE
    grant = AccessGrant.objects.get(order=order)
    b200 = f"{sandbox_sshd.sandbox}/usr/local/bin/b200"

    # When the tenant asks `b200 status --json` over its own login
    answer = tenant(ssh_node, grant, customer_key[0], tmp_path, f"{b200} status --json")

    # Then it tells the order's facts: reference, end, time left, the validated Python, the manifest's hash
    assert answer.returncode == 0, answer.stderr
    status = json.loads(answer.stdout)
    assert status["reference"] == order.reference
    assert dt.datetime.fromisoformat(status["ends_at"]) == order.ends_at
    left = (order.ends_at - timezone.now()).total_seconds()
    # (the tool counted before this test did, in whole seconds: up to one more than `left`)
    assert left - 120 <= status["seconds_left"] <= left + 1
    assert status["environment"]["python"] == ssh_node.python
    assert len(status["cards"]) == 2 and len(status["manifest_sha256"]) == 64
    assert status["notice"] is None

    # And a login shell welcomes the account in the order's language: where it is, its end, its Python, b200
    welcome = tenant(ssh_node, grant, customer_key[0], tmp_path, "bash -l -c true")
    assert welcome.returncode == 0, welcome.stderr
    assert order.reference in welcome.stdout and "b200 --help" in welcome.stdout
    assert ssh_node.python in welcome.stdout

    # And only root writes the facts: the tenant cannot change its own end
    state = sandbox_sshd.sandbox / "var/lib/b200/orders" / f"{grant.account}.json"
    assert state.stat().st_uid == 0 and oct(state.stat().st_mode & 0o777) == "0o640"
    forged = tenant(ssh_node, grant, customer_key[0], tmp_path, f"echo '{{}}' > {state}")
    assert forged.returncode != 0 and json.loads(state.read_text())["reference"] == order.reference

    # When the rental ends and the account is revoked, the command and the facts go with it
    with django_capture_on_commit_callbacks(execute=True):
        access_revoke(grant_id=grant.pk)
    assert not state.exists() and not (sandbox_sshd.sandbox / "usr/local/bin/b200").exists()


def test_the_notice_before_the_end_reaches_the_tenants_home_once_per_end(
    shared_preflight, tmp_path, ssh_node, sandbox_sshd, fast_preparation, paid_order, operator, client, customer_key,
    django_capture_on_commit_callbacks, settings,
):  # fmt: skip
    from provisioning.tasks import access_notices_task

    settings.END_NOTICE_MINUTES = 30
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    grant = AccessGrant.objects.get(order=order)
    notice = sandbox_sshd.home(grant.account) / ".b200" / "notice.json"

    # Given a rental whose end is 40 minutes away: no notice yet
    def end_in(minutes: int) -> dt.datetime:
        end = (timezone.now() + dt.timedelta(minutes=minutes)).replace(microsecond=0)
        AccessGrant.objects.filter(pk=grant.pk).update(ends_at=end)
        type(order).objects.filter(pk=order.pk).update(ends_at=end)
        return end

    end_in(40)
    with django_capture_on_commit_callbacks(execute=True):
        assert access_notices_task() == 0
    assert not notice.exists()

    # When it is 25 minutes away, beat's pass gives the notice, once
    end = end_in(25)
    with django_capture_on_commit_callbacks(execute=True):
        assert access_notices_task() == 1
        assert access_notices_task() == 0
    body = json.loads(notice.read_text())
    assert body["ends_at"] == end.strftime("%Y-%m-%dT%H:%M:%SZ") and body["reason"] == "end"
    assert 1400 <= body["seconds_left"] <= 1500

    # And `b200 status` shows it to the tenant
    b200 = f"{sandbox_sshd.sandbox}/usr/local/bin/b200"
    status = json.loads(tenant(ssh_node, grant, customer_key[0], tmp_path, f"{b200} status --json").stdout)
    assert status["notice"] == body

    # When the end moves (time credited) and comes near again, the new end is announced
    end = end_in(20)
    with django_capture_on_commit_callbacks(execute=True):
        assert access_notices_task() == 1
    assert json.loads(notice.read_text())["ends_at"] == end.strftime("%Y-%m-%dT%H:%M:%SZ")

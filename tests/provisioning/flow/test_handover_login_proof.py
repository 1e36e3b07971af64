"""The hand-over proves the access it hands over (issue 41): before the rental clock starts, the shop logs in to the
node as the order's account, on the real sandboxed sshd, with a key made for that one proof (it never holds the
customer's private key), and proves that a login, SFTP and SCP work (rsync too, where the node has it). A node where
the account cannot log in is refused before the clock starts. The probe key's line (the access tool's `probe-key`)
sits beside the customer's for the proof alone: afterwards the key file is the customer's, byte for byte, and no link
in the account's home is ever followed."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from orders.models import OrderStatus
from provisioning import node_steps
from provisioning.access import account_name
from provisioning.drivers import CommandResult, Driver, DriverError
from provisioning.handover_proof import handover_login_proof
from provisioning.models import AccessGrant, Manifest, NodeState, PreparationRun
from provisioning.node_tools.access import PROBE_COMMENT
from tests.provisioning.conftest import AccessTool, SshKey, login
from tests.provisioning.flow.node_faults import prepare

PROBE_LINE = re.compile(r'^restrict,expiry-time="(\d{12})Z" ssh-ed25519 (\S+) ' + PROBE_COMMENT + "\n$")


def customer_line_only(held: str, public_key: str) -> bool:
    """The held file as the grant writes it: one line, the customer's key behind its expiry-time, no probe."""
    key_type, data = public_key.split()[:2]
    return re.fullmatch(rf'expiry-time="\d{{12}}Z" {key_type} {re.escape(data)}\n', held) is not None


# The preparation, on the real sshd ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_preparation_hands_over_once_a_login_sftp_and_scp_work_as_the_orders_account(
    ssh_node, sandbox_sshd, fast_preparation, paid_order, operator, client, customer_key,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given a paid order on a node behind a real sshd
    order = paid_order(preparation=fast_preparation)
    account = account_name(order)

    # When the operator prepares it
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the clock started after the proof, which the run's log names; rsync is proven where the node has it (the
    # sandboxed node runs this machine's programs: .ci/run installs no rsync, so either line may be the right one)
    assert order.status == OrderStatus.ACTIVE, order.events.last().reason
    run_ = PreparationRun.objects.get(order=order)
    rsync = r"\(rsync \S+ too\)" if shutil.which("rsync") else re.escape("(the node has no rsync: not proven)")
    assert re.search(rf"login, SFTP and SCP work as {account} {rsync}", run_.log), run_.log
    assert f"Accepted publickey for {account} from 127.0.0.1" in sandbox_sshd.log()  # sshd saw the account log in

    # And the key file sshd reads holds the customer's line alone, as the home's copy does; nothing else is left
    held = sandbox_sshd.held_key(account).read_text()
    assert customer_line_only(held, customer_key[1]), held
    assert PROBE_COMMENT not in held
    assert (sandbox_sshd.home(account) / ".ssh" / "authorized_keys").read_text() == held
    assert not (sandbox_sshd.home(account) / ".b200-handover-probe").exists()


def shell_cannot_run_commands(driver: Driver, sandbox: Path, account: str) -> None:
    """A login whose shell runs nothing (an image's login policy that forces nologin)."""
    argv = ["usermod", "--prefix", str(sandbox), "--shell", "/usr/sbin/nologin", account]
    result = driver.run(argv, timeout=60)
    assert result.exit_code == 0, result.stderr


def account_expired(driver: Driver, sandbox: Path, account: str) -> None:
    """An account sshd refuses outright (its expiry day passed: a node's clock or a policy gone wrong)."""
    result = driver.run(["usermod", "--prefix", str(sandbox), "--expiredate", "1970-01-02", account], timeout=60)
    assert result.exit_code == 0, result.stderr


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("breaking", "words"),
    [
        (shell_cannot_run_commands, "a command run as the account exited 1"),
        (account_expired, "no login with the key just installed for the account"),
    ],
    ids=["shell-runs-nothing", "account-expired"],
)
def test_a_node_where_the_account_cannot_log_in_is_refused_before_the_clock_starts(
    breaking, words, ssh_node, sandbox_sshd, fast_preparation, paid_order, operator, client, customer_key,
    monkeypatch, django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given a paid order, and a node where, once the grant made the account, that account cannot log in (the break
    # runs as root on the node, through the preparation's own connection, just before the proof; the proof is real)
    order = paid_order(preparation=fast_preparation)
    held_after_proof: list[str] = []

    def broken_then_proven(**kwargs: Any) -> str:
        breaking(kwargs["driver"], sandbox_sshd.sandbox, kwargs["grant"].account)
        problem = handover_login_proof(**kwargs)
        held_after_proof.append(sandbox_sshd.held_key(kwargs["grant"].account).read_text())
        return problem

    monkeypatch.setattr(node_steps, "handover_login_proof", broken_then_proven)

    # When the operator prepares it
    prepare(client, operator, order, django_capture_on_commit_callbacks)

    # Then the run failed with the reason, and the rental clock never started
    run_ = PreparationRun.objects.get(order=order)
    assert run_.status == "failed"
    assert f"the order's account {account_name(order)} cannot use {ssh_node.name}" in run_.error, run_.error
    assert words in run_.error, run_.error
    assert order.status == OrderStatus.PREPARATION_FAILED
    assert order.active_since is None and order.ends_at is None
    assert not order.events.filter(to_status=OrderStatus.ACTIVE).exists()
    ssh_node.refresh_from_db()
    assert ssh_node.state == NodeState.FAILED

    # And the probe line was gone right after the proof, the customer's line kept byte for byte
    assert len(held_after_proof) == 1 and customer_line_only(held_after_proof[0], customer_key[1])

    # And nothing is handed over: no live grant, no manifest, the account withdrawn from the node
    assert not AccessGrant.objects.filter(order=order, revoked_at__isnull=True).exists()
    assert not Manifest.objects.filter(order=order).exists()
    assert sandbox_sshd.entry("passwd", account_name(order)) is None
    assert not sandbox_sshd.home(account_name(order)).exists()
    assert not sandbox_sshd.held_key(account_name(order)).exists()


# The access tool's probe-key, on the node ------------------------------------------------------------------------


def probe_key(access: AccessTool, account: str, key: SshKey, *, minutes: str = "10") -> CommandResult:
    access.driver.put_file(key.public.encode() + b"\n", "probe.pub", mode=0o600)
    return access("probe-key", "--account", account, "--key-file", "probe.pub", "--minutes", minutes)


def probe_key_remove(access: AccessTool, account: str) -> dict:
    result = access("probe-key", "--account", account, "--remove")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_probe_key_adds_one_limited_line_that_logs_in_and_remove_gives_the_file_back_byte_for_byte(
    access, sshd, account, make_ssh_key
):
    # Given a granted account
    customer, probe = make_ssh_key(), make_ssh_key("shop@handover")
    assert access.grant(account, customer).exit_code == 0
    held, home_copy = sshd.held_key(account), sshd.home(account) / ".ssh" / "authorized_keys"
    before, home_before = held.read_bytes(), home_copy.read_bytes()

    # When the probe key is added for 10 minutes
    added = probe_key(access, account, probe)

    # Then the file is the customer's bytes and one line more: restricted, expiring in 10 minutes, with its comment
    assert added.exit_code == 0, added.stderr
    content = held.read_bytes()
    assert content.startswith(before)
    line = PROBE_LINE.match(content[len(before) :].decode())
    assert line is not None, content
    assert line.group(2) == probe.public.split()[1]
    expires = dt.datetime.strptime(line.group(1), "%Y%m%d%H%M").replace(tzinfo=dt.UTC)
    now = dt.datetime.now(dt.UTC)
    assert now + dt.timedelta(minutes=9) < expires <= now + dt.timedelta(minutes=11)
    assert home_copy.read_bytes() == content
    assert json.loads(added.stdout)["probe_fingerprint"] == probe.fingerprint

    # And both keys log in as the account, the probe's without a terminal (restrict)
    with login(sshd, account, probe) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"
    with login(sshd, account, customer) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"

    # When it is removed, then the files are byte for byte what they were, and the probe key logs in no more
    assert probe_key_remove(access, account)["removed"] == 2  # the held file's line and the home copy's
    assert held.read_bytes() == before and home_copy.read_bytes() == home_before
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, probe)

    # And removing again changes nothing (idempotent)
    assert probe_key_remove(access, account)["removed"] == 0
    assert held.read_bytes() == before


def test_probe_key_never_follows_a_link_the_tenant_planted_at_its_ssh_folder(
    access, sshd, account, make_ssh_key, tmp_path
):
    # Given a granted account whose ~/.ssh is a link to a folder only root writes
    customer, probe = make_ssh_key(), make_ssh_key("shop@handover")
    assert access.grant(account, customer).exit_code == 0
    before = sshd.held_key(account).read_bytes()
    decoy = tmp_path / "root-only"
    decoy.mkdir(mode=0o700)
    ssh_folder = sshd.home(account) / ".ssh"

    def plant_link() -> None:
        for name in os.listdir(ssh_folder):
            os.unlink(ssh_folder / name)
        ssh_folder.rmdir()
        ssh_folder.symlink_to(decoy)
        uid = int(sshd.entry("passwd", account)[2])
        os.lchown(ssh_folder, uid, uid)

    plant_link()

    # When the probe key is added, then the link is replaced by a real folder and nothing is written through it
    added = probe_key(access, account, probe)
    assert added.exit_code == 0, added.stderr
    assert os.listdir(decoy) == []
    assert ssh_folder.is_dir() and not ssh_folder.is_symlink()
    assert PROBE_COMMENT in sshd.held_key(account).read_text()

    # When the link is planted again and the probe key removed, then the link is left alone, never followed, and the
    # file sshd reads is the customer's again
    plant_link()
    assert probe_key_remove(access, account)["removed"] == 1  # the held file's line; the home was not entered
    assert ssh_folder.is_symlink() and os.listdir(decoy) == []
    assert sshd.held_key(account).read_bytes() == before


def test_probe_key_refuses_an_account_not_its_own_and_a_key_file_that_is_not_one_ed25519_key(
    access, sshd, account, make_ssh_key
):
    customer, probe = make_ssh_key(), make_ssh_key("shop@handover")
    assert access.grant(account, customer).exit_code == 0
    before = sshd.held_key(account).read_bytes()

    # An account the tool did not make (root's is the machine's): refused, exit 3, added or removed
    assert probe_key(access, "root", probe).exit_code == 3
    assert access("probe-key", "--account", "root", "--remove").exit_code == 3

    # Two keys in the file, or the customer's own key: the key is refused, exit 4
    access.driver.put_file(f"{probe.public}\n{customer.public}\n".encode(), "two.pub", mode=0o600)
    two = access("probe-key", "--account", account, "--key-file", "two.pub", "--minutes", "10")
    assert two.exit_code == 4 and "exactly one public key" in two.stderr
    assert probe_key(access, account, customer).exit_code == 4

    # A life outside 1 to 60 minutes, or --remove with --minutes: a usage error, exit 2
    assert probe_key(access, account, probe, minutes="0").exit_code == 2
    assert access("probe-key", "--account", account, "--remove", "--minutes", "10").exit_code == 2

    # And the customer's file was never touched
    assert sshd.held_key(account).read_bytes() == before


def test_a_grant_or_rekey_after_the_probe_drops_its_line_and_remove_then_has_nothing_to_do(
    access, sshd, account, make_ssh_key
):
    customer, probe, replaced = make_ssh_key(), make_ssh_key("shop@handover"), make_ssh_key()
    assert access.grant(account, customer).exit_code == 0
    before = sshd.held_key(account).read_bytes()

    # A grant again (the same key) writes the customer's line alone: the probe line is gone, --remove is a no-op
    assert probe_key(access, account, probe).exit_code == 0
    assert access.grant(account, customer).exit_code == 0
    assert sshd.held_key(account).read_bytes() == before
    assert probe_key_remove(access, account)["removed"] == 0

    # A rekey while a probe line is there (one a lost hand-over left behind) replaces the key as ever
    assert probe_key(access, account, probe).exit_code == 0
    access.driver.put_file(replaced.public.encode() + b"\n", "new.pub", mode=0o600)
    rekeyed = access("rekey", "--account", account, "--key-file", "new.pub")
    assert rekeyed.exit_code == 0, rekeyed.stderr
    assert probe_key_remove(access, account)["removed"] == 0
    assert customer_line_only(sshd.held_key(account).read_text(), replaced.public)

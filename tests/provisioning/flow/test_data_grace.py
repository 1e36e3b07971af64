"""Time to take data home, on the real sandboxed sshd: at the rental's end the tenant's processes stop and the
(FAKE) card is freed at once, the account keeps its files and downloads them over read-only SFTP with its own
key (no shell, no upload, no delete, not even through its ~/.bashrc), the node is not sold meanwhile, and at the
window's end the clean end of rental removes the account. With DATA_GRACE_HOURS at 0 the end is as before."""

from __future__ import annotations

import datetime as dt
import subprocess
import time

import paramiko
import pytest
from django.core import mail
from django.utils import timezone

from orders import capacity
from orders.models import OrderStatus
from orders.order_links import order_status_path
from provisioning.access import account_name
from provisioning.models import AccessGrant, NodeState
from provisioning.tasks import access_reminders_task, access_revoke_due_task
from tests.provisioning.flow.node_faults import prepare
from tests.provisioning.flow.test_preparation_over_ssh import customer_login, run
from tests.provisioning.test_end_of_rental import processes_of, shared_memory_of
from tests.sshd import FAKE_CARD

CHECKPOINT = b"FAKE checkpoint of step 100\n" * 100
# What the tenant leaves running and planted during the rental: a checkpoint, a process on the (FAKE) card,
# shared memory, and a ~/.bashrc that would start a job if any login ran bash (Debian's bash reads it for a
# command sshd starts).
PLANT = """
set -e
mkdir -p ~/checkpoints
echo 'touch ~/bashrc-ran; setsid sleep 600 </dev/null >/dev/null 2>&1 &' > ~/.bashrc
ipcmk -M 4096 >/dev/null
setsid sleep 600 3<{card} </dev/null >/dev/null 2>&1 &
sleep 0.3
"""


def ended(order) -> None:
    """The rental's end has come (the beat pass runs next)."""
    past = timezone.now() - dt.timedelta(seconds=1)
    AccessGrant.objects.filter(order=order).update(ends_at=past)
    type(order).objects.filter(pk=order.pk).update(ends_at=past)


def beat(capture) -> None:
    with capture(execute=True):
        access_revoke_due_task()


def ssh_command(ssh_node, key_path, user: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """The customer's own `ssh`, the node's host key pinned."""
    known = key_path.parent / "known_hosts"
    known.write_text(f"[{ssh_node.host}]:{ssh_node.port} {ssh_node.host_key}\n")
    argv = [
        "ssh", "-i", str(key_path), "-p", str(ssh_node.port), "-o", f"UserKnownHostsFile={known}",
        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        f"{user}@{ssh_node.host}", *args,
    ]  # fmt: skip
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)


def shell_output(client: paramiko.SSHClient, typed: str) -> str:
    """What an interactive shell prints for what the customer types (a few seconds at most)."""
    output = b""
    try:
        channel = client.invoke_shell()
    except paramiko.SSHException:
        return ""  # refused outright (no pty under `restrict`)
    channel.settimeout(5)
    try:
        channel.send(typed.encode())
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline and not channel.exit_status_ready():
            if channel.recv_ready():
                output += channel.recv(4096)
            time.sleep(0.05)
    except (OSError, paramiko.SSHException):
        pass  # the session closed: nothing ran
    finally:
        channel.close()
    return output.decode(errors="replace")


@pytest.fixture
def gpus(sandbox_sshd):
    """The node has GPUs: the sandbox's FAKE nvidia-smi (no GPU on this machine)."""
    sandbox_sshd.install_fake_nvidia_smi()
    yield
    sandbox_sshd.remove_fake_nvidia_smi()


@pytest.mark.django_db
def test_after_the_end_the_tenant_downloads_its_checkpoint_over_read_only_sftp_and_nothing_else_until_the_window_ends(
    shared_preflight, ssh_node, sandbox_sshd, fast_preparation, paid_order, operator, client, customer_key, settings,
    django_capture_on_commit_callbacks, gpus,
):  # fmt: skip
    settings.DATA_GRACE_HOURS = 12
    capture = django_capture_on_commit_callbacks
    # Given an active rental whose tenant keeps a checkpoint, a process on the card, shared memory and a ~/.bashrc
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, capture)
    assert order.status == OrderStatus.ACTIVE
    client.logout()
    grant = AccessGrant.objects.get(order=order)
    account = account_name(order)
    where = {"host": grant.host, "port": grant.port, "user": account}
    tenant = customer_login(ssh_node, where, customer_key[0])
    try:
        assert run(tenant, PLANT.format(card=FAKE_CARD) + "echo planted") == "planted"
        with tenant.open_sftp() as sftp, sftp.open("checkpoints/step-100.pt", "wb") as handle:
            handle.write(CHECKPOINT)
    finally:
        tenant.close()
    uid = int(sandbox_sshd.entry("passwd", account)[2])
    assert processes_of(uid) and shared_memory_of(uid)
    # And the reminder before the end said the files stay after it, for SFTP
    soon = timezone.now() + dt.timedelta(minutes=30)
    AccessGrant.objects.filter(order=order).update(ends_at=soon)
    type(order).objects.filter(pk=order.pk).update(ends_at=soon)
    mail.outbox.clear()
    with capture(execute=True):
        access_reminders_task()
    assert "At the end your processes are stopped, but your files stay until" in mail.outbox[-1].body
    mail.outbox.clear()

    # When the rental's end comes and beat's end-of-rental pass runs (twice: the window opens once)
    ended(order)
    beat(capture)
    beat(capture)

    # Then the window is open until the end plus DATA_GRACE_HOURS; the tenant's processes, its work on the card
    # and its shared memory are gone; the order is still active and its node still taken
    grant.refresh_from_db()
    order.refresh_from_db()
    ssh_node.refresh_from_db()
    assert grant.grace_until == grant.ends_at + dt.timedelta(hours=12)
    assert grant.revoked_at is None and order.status == OrderStatus.ACTIVE and ssh_node.state == NodeState.IN_USE
    assert processes_of(uid) == [] and shared_memory_of(uid) == []
    assert ssh_node not in capacity.free_nodes(timezone.now())
    # And the customer got one email, saying until when and how to download
    assert [message.subject for message in mail.outbox] == [
        f"Order {order.reference}: rental ended, download your data"
    ]
    assert f"sftp -P {ssh_node.port} {account}@{ssh_node.host}" in mail.outbox[0].body
    # And the order page shows the window and the commands
    page = client.get(order_status_path(order)).content.decode()
    assert "Time to take your data home" in page and f"sftp -P {ssh_node.port} {account}@{ssh_node.host}" in page

    # When the customer downloads the checkpoint with its own key
    tenant = customer_login(ssh_node, where, customer_key[0])
    try:
        with tenant.open_sftp() as sftp:
            with sftp.open("checkpoints/step-100.pt", "rb") as handle:
                downloaded = handle.read()
            # Then it is the checkpoint; and nothing can be written or removed (read-only)
            assert downloaded == CHECKPOINT
            with pytest.raises(OSError), sftp.open("checkpoints/new.pt", "wb") as handle:
                handle.write(b"x")
            with pytest.raises(OSError):
                sftp.remove("checkpoints/step-100.pt")
            with pytest.raises(OSError):
                sftp.rename("checkpoints/step-100.pt", "checkpoints/moved.pt")
            assert sftp.listdir("checkpoints") == ["step-100.pt"]
        # And an interactive shell runs nothing
        assert "shell-42" not in shell_output(tenant, "echo shell-$((6*7))\nexit\n")
    finally:
        tenant.close()
    # And a command runs nothing either, and no login ran the tenant's ~/.bashrc
    command = ssh_command(ssh_node, customer_key[0], account, "echo", "hi")
    assert "hi" not in command.stdout
    assert not (sandbox_sshd.home(account) / "bashrc-ran").exists()
    assert processes_of(uid) == [] or all("sftp-server" in _command_of(pid) for pid in processes_of(uid))
    # And the `sftp` command downloads too
    target = customer_key[0].parent / "downloaded.pt"
    sftp = subprocess.run(
        [
            "sftp", "-i", str(customer_key[0]), "-P", str(ssh_node.port), "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={customer_key[0].parent / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes",
            f"{account}@{ssh_node.host}:checkpoints/step-100.pt", str(target),
        ],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert sftp.returncode == 0, sftp.stderr
    assert target.read_bytes() == CHECKPOINT

    # When the window's end passes and beat runs
    AccessGrant.objects.filter(pk=grant.pk).update(grace_until=timezone.now() - dt.timedelta(seconds=1))
    mail.outbox.clear()
    beat(capture)

    # Then the clean end of rental ran: the account and its files are gone, the node is for sale again, the order
    # ended, and the customer was told
    grant.refresh_from_db()
    order.refresh_from_db()
    ssh_node.refresh_from_db()
    assert grant.revoked_at is not None and order.status == OrderStatus.ENDED
    assert sandbox_sshd.entry("passwd", account) is None and not sandbox_sshd.home(account).exists()
    assert ssh_node.state == NodeState.AVAILABLE and ssh_node in capacity.free_nodes(timezone.now())
    assert [message.subject for message in mail.outbox] == [f"Order {order.reference}: rental ended"]


def _command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.django_db
def test_with_no_data_window_the_end_of_rental_removes_the_account_at_once(
    shared_preflight, ssh_node, sandbox_sshd, fast_preparation, paid_order, operator, client, settings,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    settings.DATA_GRACE_HOURS = 0
    # Given an active rental
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    assert order.status == OrderStatus.ACTIVE
    mail.outbox.clear()

    # When its end comes and beat runs
    ended(order)
    beat(django_capture_on_commit_callbacks)

    # Then the account is removed at once, without a window, and the order ended
    grant = AccessGrant.objects.get(order=order)
    order.refresh_from_db()
    assert grant.revoked_at is not None and grant.grace_until is None
    assert order.status == OrderStatus.ENDED
    assert sandbox_sshd.entry("passwd", account_name(order)) is None
    assert [message.subject for message in mail.outbox] == [f"Order {order.reference}: rental ended"]

"""SSH that works on the first try (issue 41), on the real sandboxed sshd: the `known_hosts` line and the
`~/.ssh/config` block the order gives (API, page, email, manifest) log the customer in with
`StrictHostKeyChecking yes` and nothing asked, and SFTP and SCP work through the same alias. A node whose key
is not the one handed over gets no line to trust."""

from __future__ import annotations

import subprocess

import pytest
from django.core import mail
from django.test import Client

from orders.models import OrderStatus
from provisioning.models import AccessGrant, Manifest
from provisioning.ssh_setup import known_hosts_line
from tests.provisioning.flow.node_faults import prepare

pytestmark = pytest.mark.django_db


def customer_ssh_files(tmp_path, access_node: dict, key_path) -> tuple[list[str], str]:
    """The customer's ~/.ssh as the order tells them to set it up (their own key added, as they have it), and
    the alias to connect to. BatchMode: any question (an unknown host key) fails instead of waiting."""
    (tmp_path / "known_hosts").write_text(access_node["known_hosts_line"] + "\n")
    config = tmp_path / "config"
    config.write_text(
        access_node["ssh_config"]
        + f"    UserKnownHostsFile {tmp_path / 'known_hosts'}\n    IdentityFile {key_path}\n"
        + "    IdentitiesOnly yes\n    BatchMode yes\n"
    )
    return ["-F", str(config)], access_node["alias"]


def test_the_orders_ssh_config_and_known_hosts_line_log_in_sftp_and_scp_with_nothing_asked(
    shared_preflight, tmp_path, ssh_node, fast_preparation, paid_order, operator, client, customer_key,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    # Given an active rental on a node behind a real sshd
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    assert order.status == OrderStatus.ACTIVE
    client.logout()
    grant = AccessGrant.objects.get(order=order)

    # When the customer reads the access from the API
    answer = Client().get(f"/api/v1/orders/{order.reference}/", headers={"X-Order-Token": order.access_token})
    assert answer.status_code == 200, answer.content
    node = answer.json()["access"]["nodes"][0]

    # Then it gives the pinned key's line under an alias, and a config block that pins it strictly
    alias = node["alias"]
    assert node["known_hosts_line"] == f"{alias} {ssh_node.host_key.split()[0]} {ssh_node.host_key.split()[1]}"
    assert f"Host {alias}\n" in node["ssh_config"] and "StrictHostKeyChecking yes" in node["ssh_config"]
    assert f"HostKeyAlias {alias}" in node["ssh_config"] and f"Port {grant.port}" in node["ssh_config"]

    # And the customer's ssh, set up with them alone, logs in, lists over SFTP and copies over SCP, asking nothing
    options, alias = customer_ssh_files(tmp_path, node, customer_key[0])
    login = subprocess.run(["ssh", *options, alias, "whoami"], capture_output=True, text=True, timeout=30)
    assert login.returncode == 0, login.stderr
    assert login.stdout.strip() == grant.account
    sftp = subprocess.run(
        ["sftp", *options, "-b", "-", alias], input="pwd\n", capture_output=True, text=True, timeout=30
    )
    assert sftp.returncode == 0, sftp.stderr
    (tmp_path / "results.txt").write_text("step 100: loss 1.23\n")
    scp = subprocess.run(
        ["scp", *options, str(tmp_path / "results.txt"), f"{alias}:results.txt"], capture_output=True, text=True,
        timeout=30,
    )  # fmt: skip
    assert scp.returncode == 0, scp.stderr
    back = subprocess.run(["ssh", *options, alias, "cat results.txt"], capture_output=True, text=True, timeout=30)
    assert back.stdout == "step 100: loss 1.23\n"

    # And the same line is in the signed manifest and the access email
    manifest = Manifest.objects.get(order=order).body
    assert manifest["nodes"][0]["known_hosts_line"] == node["known_hosts_line"]
    ready = next(message for message in mail.outbox if node["ssh_command"] in message.body)
    assert node["known_hosts_line"] in ready.body and node["ssh_config"] in ready.body


def test_a_node_re_pinned_after_the_hand_over_gives_no_line_to_trust(
    shared_preflight, ssh_node, fast_preparation, paid_order, operator, client, django_capture_on_commit_callbacks
):
    order = paid_order(preparation=fast_preparation)
    prepare(client, operator, order, django_capture_on_commit_callbacks)
    grant = AccessGrant.objects.select_related("node", "order").get(order=order)
    assert known_hosts_line(grant)

    # When staff pin another key on the node (a reinstalled machine)
    grant.node.host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl other"

    # Then no line vouches for it: the hand-over's fingerprint is what the customer was told to trust
    assert known_hosts_line(grant) is None

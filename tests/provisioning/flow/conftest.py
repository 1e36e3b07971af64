"""A paid order, a sandboxed GPU node (the real sshd of tests/sshd.py, or the local driver) and the staff."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import transaction

from orders.models import Order
from orders.payment_outcome import OrderPaymentOutcome, order_payment_outcome
from tests.placing import order_posted
from tests.provisioning.flow.node_faults import (  # noqa: F401 - fixtures
    fast_preparation,
    node_on,
    private_sshd,
    workers,
)
from tests.sshd import sandbox_sshd  # noqa: F401 - the session fixture

# What `shared_preflight` runs on the node in place of the preflight command (argv: the store folder, then the
# preflight's own command line). The first run of a profile (with the node's device, world size and architecture)
# is the real preflight, whose passing report and output it keeps; later runs of the same profile write that report
# for their own order and print its output. Everything around it (upload, setup, reading the report back over the
# driver, the grant, the login proof) is the preparation's own.
SHARED_PREFLIGHT = r"""
import hashlib, json, os, subprocess, sys
store, argv = sys.argv[1], sys.argv[2:]
option = lambda name: argv[argv.index(name) + 1] if name in argv else None
with open(option("--profile"), "rb") as handle:
    profile = handle.read().decode()
key = json.dumps([profile, option("--device"), option("--world-size"), option("--expect-arch")])
stored = os.path.join(store, hashlib.sha256(key.encode()).hexdigest()[:20] + ".json")
if os.path.exists(stored):
    with open(stored) as handle:
        kept = json.load(handle)
    order, report = option("--order"), kept["report"]
    report["order_reference"] = order
    with open(option("--json"), "w") as handle:
        json.dump(report, handle)
    said = kept["stdout"]
    sys.stdout.write(said.replace(kept["order"], order) if kept["order"] and order else said)
    sys.stderr.write(kept["stderr"])
    sys.exit(0)
done = subprocess.run(argv, capture_output=True, text=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
if done.returncode == 0 and os.path.exists(option("--json")):
    with open(option("--json")) as handle:
        report = json.load(handle)
    if report.get("ok"):
        kept = {"report": report, "order": option("--order"), "stdout": done.stdout, "stderr": done.stderr}
        with open(stored + ".part", "w") as handle:
            json.dump(kept, handle)
        os.replace(stored + ".part", stored)
sys.exit(done.returncode)
"""


@pytest.fixture(scope="session")
def preflight_store(tmp_path_factory):
    """Where this session (this pytest-xdist worker) keeps the passing reports of its real preflights."""
    return tmp_path_factory.mktemp("preflight-store")


@pytest.fixture
def shared_preflight(preflight_store, monkeypatch):
    """For a test that needs a node that passed its preflight, not the preflight itself: a preparation's preflight
    step runs the real preflight the first time this session runs its profile, and after that writes the report that
    real run produced, for the test's order (the preflight's two ranks cost about 20 s on 2 CPUs, whatever the
    profile). Connecting, uploading, the setup step, reading the report back, the grant and the login proof run as
    always, over the node's driver (the sandboxed sshd for `ssh_node`). Runs in this process only: a test whose
    preparation runs in a Celery worker process, or that watches or breaks the preflight, runs the real one."""
    from provisioning import node_steps

    real = node_steps.command_line

    def command_line(**fields) -> list[str]:
        return [fields["python"], "-c", SHARED_PREFLIGHT, str(preflight_store), *real(**fields)]

    monkeypatch.setattr(node_steps, "command_line", command_line)


@pytest.fixture
def customer_key(tmp_path):
    """The customer's key pair, made by ssh-keygen as a customer would."""
    path = tmp_path / "customer"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, capture_output=True)
    return path, path.with_suffix(".pub").read_text().strip()


@pytest.fixture
def ssh_node(db, sandbox_sshd, monkeypatch):  # noqa: F811
    """A GPU node behind the sandboxed sshd: CPU preflight with two processes, accounts in the sandbox."""
    monkeypatch.setenv("NODE_SSH_KEY_FILE", str(sandbox_sshd.operator_key_file))
    node = sandbox_sshd.node(
        name="sandbox-node",
        python=sys.executable,
        preflight_device="cpu",
        gpu_count=2,
        accounts_root=str(sandbox_sshd.sandbox),
    )
    node.save()
    return node


@pytest.fixture
def local_node(make_node, sandbox_sshd):  # noqa: F811 - the sandboxed user database, used from this machine
    """A node on this machine (the local driver) whose customer accounts live in the sandboxed sshd's database."""

    def make(**fields):
        defaults = {"python": sys.executable, "preflight_device": "cpu", "gpu_count": 2}
        return make_node(**{**defaults, "accounts_root": str(sandbox_sshd.sandbox), **fields})

    return make


@pytest.fixture
def paid_order(anvil, client, order_payload, customer_key):
    """Place an order through the API and pay it through the one door payments uses."""

    def place(*, lots: int = 1, preparation: str = "two-card-distributed", ssh_public_key: str = "") -> Order:
        key = ssh_public_key or customer_key[1]
        placed = order_posted(
            client, {**order_payload, "lots": lots, "preparation": preparation, "ssh_public_key": key}
        )
        order = Order.objects.get(reference=placed["reference"])
        with transaction.atomic():
            order_payment_outcome(order_id=order.pk, outcome=OrderPaymentOutcome.PAID, reason="paid in the test")
        order.refresh_from_db()
        order.access_token = placed["access_token"]
        return order

    return place

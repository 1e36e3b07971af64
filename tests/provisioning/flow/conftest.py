"""A paid order, a sandboxed GPU node (the real sshd of tests/sshd.py, or the local driver) and the staff."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import transaction

from orders.models import Order
from orders.payment_outcome import OrderPaymentOutcome, order_payment_outcome
from tests.provisioning.flow.node_faults import (  # noqa: F401 - fixtures
    fast_preparation,
    node_on,
    private_sshd,
    workers,
)
from tests.sshd import sandbox_sshd  # noqa: F401 - the session fixture


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
        body = {**order_payload, "lots": lots, "preparation": preparation, "ssh_public_key": key}
        response = client.post("/api/v1/orders/", body, content_type="application/json")
        assert response.status_code == 201, response.json()
        order = Order.objects.get(reference=response.json()["reference"])
        with transaction.atomic():
            order_payment_outcome(order_id=order.pk, outcome=OrderPaymentOutcome.PAID, reason="paid in the test")
        order.refresh_from_db()
        order.access_token = response.json()["access_token"]
        return order

    return place

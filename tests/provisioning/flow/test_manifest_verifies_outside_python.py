"""A customer verifies the signed manifest in another language: the docs' JavaScript snippet (Node.js's own
crypto, JCS in a few lines over `JSON.parse`) and its Python snippet accept a real manifest whose body holds the
numbers, keys and strings where JSON serialisers disagree, and refuse it once changed."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from orders.models import OrderStatus
from orders.orders import order_transition
from provisioning.access import access_handover, account_name
from provisioning.manifest import manifest_document, manifest_verify, signing_key
from provisioning.models import AccessGrant, Manifest, NodeState, PreparationRun, RunStatus
from provisioning.states import nodes_transition
from tests.servers import ROOT

# The downloaded file's name in the docs' snippets (docs/interfaces.md, "The manifest").
MANIFEST_FILE = "manifest-B2-XXXX-XXXX.json"

# Where Python's json.dumps and JavaScript's JSON.stringify (hence RFC 8785) write different text, or sort apart.
AWKWARD_VALUES = {
    "tiny": 1e-07,  # Python 1e-07, JavaScript 1e-7
    "tenth": 0.1,
    "huge": 1e21,  # PostgreSQL's jsonb gives it back as the integer 1000000000000000000000
    "hundred_quintillion": 1e20,  # Python 1e+20, JavaScript 100000000000000000000
    "smallest": 5e-324,
    "negative": -2.5e-8,
    "integral_float": 3.0,
    "max_safe_integer": 2**53 - 1,
    "past_safe_integers": 2**63,  # a double in every JSON parser of JavaScript: 9223372036854776000
    "negative_int": -42,
    "names": {"ñandú": "Grüße, 東京 ✓", "😀": "an astral key", "ａ": "a full-width key", "Z": "ascii"},
    "escapes": 'tab\t newline\n quote" backslash\\ control\x01 separator\u2028 ',
    "nested": [{"depth": [1, 2.5, {"none": None, "no": False, "yes": True}]}, [], {}],
}


def preflight_report(reference: str) -> dict:
    return {
        "ok": True,
        "order_reference": reference,
        "duration_s": 9.123456789,
        "versions": {"python": "3.11.9", "torch": "2.13.0+cpu", "gpus": ["NVIDIA B200 — carte nº 1", "NVIDIA B200"]},
        "thresholds": {"step_time_s": 0.25, "allreduce_busbw_gbps": 1e-07},
        "checks": [{"name": "load", "status": "pass", "detail": "ok", "metrics": AWKWARD_VALUES}],
    }


@pytest.fixture
def active_order(make_node, paid_order):
    """A paid order made active by the project's own hand-over: its manifest signed by manifest_create."""
    make_node()
    order = paid_order()
    node = order.reservations.get().node
    now = timezone.now()
    report = preflight_report(order.reference)
    with transaction.atomic():
        order_transition(order=order, to=OrderStatus.PREPARING, actor="olga", reason="the test prepares it")
        # The node is being prepared, as preparation_start leaves it: the hand-over moves it on to in use.
        nodes_transition(node_ids=[node.pk], to=NodeState.PREPARING, actor="olga", reason="the test prepares it")
        run = PreparationRun.objects.create(
            order=order,
            node=node,
            status=RunStatus.PASSED,
            report=report,
            report_sha256=hashlib.sha256(json.dumps(report).encode()).hexdigest(),
            requested_by="olga",
            finished_at=now,
        )
        AccessGrant.objects.create(
            order=order,
            node=node,
            account=account_name(order),
            host="gpu-01.example.org",
            port=22,
            host_key_fingerprint="SHA256:" + "A" * 43,
            ssh_key_fingerprint=order.ssh_key_fingerprint,
            ends_at=now,
        )
        access_handover(order=order, runs=[run], now=now)
    return order


def docs_snippet(language: str) -> str:
    """docs/interfaces.md's verification snippet in that language (the first such block after "To verify it
    offline")."""
    docs = (ROOT / "docs" / "interfaces.md").read_text()
    after = docs[docs.index("To verify it offline") :]
    return re.search(rf"```{language}\n(.*?)```", after, re.DOTALL).group(1)


def downloaded_manifest(order, folder: Path) -> dict:
    """The customer's download and the shop's public key, saved where the snippets read them."""
    client = Client()
    response = client.get(f"/o/{order.reference}/{order.access_token}/manifest.json")
    assert response.status_code == 200, response.content
    (folder / MANIFEST_FILE).write_bytes(response.content)
    (folder / "manifest-key.pub").write_bytes(client.get("/manifest-key.pub").content)
    return json.loads(response.content)


def run_snippet(command: list[str], code: str, folder: Path, name: str) -> subprocess.CompletedProcess:
    (folder / name).write_text(code)
    return subprocess.run([*command, name], cwd=folder, capture_output=True, text=True, timeout=60)


def node_binary() -> str:
    node = shutil.which("node")
    assert node, "Node.js is a prerequisite of the project (and of this test)"
    return node


@pytest.mark.django_db
def test_the_docs_javascript_snippet_verifies_a_real_manifest_with_nodes_own_crypto(active_order, tmp_path):
    # Given a manifest signed by the shop, with awkward numbers, keys and strings in its body, downloaded
    document = downloaded_manifest(active_order, tmp_path)

    # When the customer runs the docs' JavaScript snippet on it
    verified = run_snippet([node_binary()], docs_snippet("js"), tmp_path, "verify.js")

    # Then Node.js's crypto.verify accepts the signature over the JCS of the parsed body
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.strip() == "valid"
    assert document["body"]["canonicalization"] == "JCS (RFC 8785)"

    # And a body changed in one number is refused
    document["body"]["nodes"][0]["report"]["checks"][0]["metrics"]["tiny"] = 2e-07
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(document))
    tampered = run_snippet([node_binary()], docs_snippet("js"), tmp_path, "verify.js")
    assert tampered.returncode == 1, tampered.stdout + tampered.stderr
    assert "INVALID" in tampered.stdout


@pytest.mark.django_db
def test_the_docs_python_snippet_verifies_the_same_manifest(active_order, tmp_path):
    document = downloaded_manifest(active_order, tmp_path)

    verified = run_snippet([sys.executable], docs_snippet("python"), tmp_path, "verify.py")

    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert manifest_verify(document["body"], document["signature"], document["public_key"])
    document["body"]["gpus"] = 99
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(document))
    tampered = run_snippet([sys.executable], docs_snippet("python"), tmp_path, "verify.py")
    assert tampered.returncode != 0 and "InvalidSignature" in tampered.stderr


@pytest.mark.django_db
def test_a_manifest_signed_before_jcs_still_verifies_and_says_how_it_was_signed(active_order):
    # Given a manifest stored before JCS: no `canonicalization` in its body, signed over Python's json.dumps
    manifest = Manifest.objects.get(order=active_order)
    body = {key: value for key, value in manifest.body.items() if key != "canonicalization"}
    body["manifest_version"] = 1
    legacy = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    manifest.body, manifest.signature = body, base64.b64encode(signing_key().sign(legacy)).decode()
    manifest.save()
    manifest.refresh_from_db()

    # Then it still verifies, and its download names the canonical form it was signed over
    assert manifest_verify(manifest.body, manifest.signature, manifest.public_key)
    document = manifest_document(manifest)
    assert "JCS" not in document["signature_algorithm"]
    assert document["body_sha256"] == hashlib.sha256(legacy).hexdigest()

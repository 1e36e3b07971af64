"""The manifest: one signed chain of evidence from the payment to the node that passed its preflight.

Signed with the shop's Ed25519 key (`MANIFEST_SIGNING_KEY`, base64 of the 32-byte private key); the
public key is published at /manifest-key.pub. To verify offline: recompute the canonical JSON of `body` by
JCS (RFC 8785), which any language can, and check `signature` (base64) with the public key. Manifests
signed before JCS (no `canonicalization` in their body) were signed over Python's `json.dumps` form.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from functools import lru_cache
from typing import Any

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings

from orders.models import ExtensionStatus, Order
from provisioning.bundle import node_bundle_sha256
from provisioning.models import AccessGrant, Manifest, PreparationRun, RunStatus
from provisioning.ssh_setup import known_hosts_line

JCS = "JCS (RFC 8785)"
JCS_ALGORITHM = "Ed25519 over the JCS (RFC 8785) canonical JSON of `body`"
LEGACY_ALGORITHM = "Ed25519 over the canonical JSON of `body` (sorted keys, no spaces, UTF-8)"


def _as_doubles(value: Any) -> Any:
    """Every JSON number as the double that JavaScript's JSON.parse (and RFC 8785) reads: an integer past
    2**53, or one that PostgreSQL's jsonb gives back for an integral float (1e21), has no other meaning."""
    if isinstance(value, dict):
        return {key: _as_doubles(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_doubles(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def jcs_json(body: dict[str, Any]) -> bytes:
    return rfc8785.dumps(_as_doubles(body))


def legacy_json(body: dict[str, Any]) -> bytes:
    """The canonical form of manifests signed before JCS: Python's own, which other languages cannot rebuild."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def canonical_json(body: dict[str, Any]) -> bytes:
    """The bytes the signature covers: JCS when the body says so, else the legacy form it was signed over."""
    return jcs_json(body) if body.get("canonicalization") == JCS else legacy_json(body)


@lru_cache(maxsize=2)
def _signing_key(encoded: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(base64.b64decode(encoded))


def signing_key() -> Ed25519PrivateKey:
    return _signing_key(settings.MANIFEST_SIGNING_KEY)


def public_key_b64() -> str:
    raw = signing_key().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def manifest_verify(body: dict[str, Any], signature_b64: str, public_b64: str) -> bool:
    """What a customer does offline, in Python: True when the signature holds."""
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_b64))
    try:
        key.verify(base64.b64decode(signature_b64), canonical_json(body))
    except Exception:  # cryptography raises InvalidSignature; any malformed input is a failure too
        return False
    return True


def _credits(payment: Any) -> list[dict[str, Any]]:  # noqa: ANN401 - a payments PaymentRequest, by its relation
    """The on-chain transfers that paid a payment request (the order's, an extension's, read through their
    relations: provisioning imports no payments module), in chain order: each a proof anyone can look up."""
    return [
        {
            "tx_hash": c.tx_hash,
            "log_index": c.log_index,
            "block_number": c.block_number,
            "block_hash": c.block_hash,
            "amount_base_units": str(int(c.amount_base_units)),
        }
        for c in payment.credits.counted().order_by("block_number", "log_index")
    ]


def _instant(value: dt.datetime | None, what: str) -> str:
    """A time the manifest states: set before anything is signed (an active order, an applied extension)."""
    if value is None:
        raise ValueError(f"the manifest needs {what}, which is not set")
    return value.isoformat()


def _extensions_evidence(order: Order) -> list[dict[str, Any]]:
    """Each applied extension and the payment that bought it (in revisions signed after an extension)."""
    applied = order.extensions.filter(status=ExtensionStatus.APPLIED).select_related("payment__asset")
    applied = applied.order_by("applied_at", "pk")
    return [
        {
            "duration_days": extension.duration_days,
            "applied_at": _instant(extension.applied_at, "an applied extension's time"),
            "ends_at": _instant(extension.ends_at_after, "an applied extension's end"),
            "chain_id": extension.payment.chain_id,
            "asset": extension.payment.asset.symbol,
            "contract": extension.payment.contract,
            "address": extension.payment.address,
            "amount_base_units": str(int(extension.payment.amount_base_units)),
            "credits": _credits(extension.payment),
        }
        for extension in applied
    ]


def manifest_body(order: Order, runs: list[PreparationRun], grants: list[AccessGrant]) -> dict[str, Any]:
    payment: Any = order.payment  # a payments PaymentRequest, read by its fields: provisioning imports no payments
    by_node = {grant.node_id: grant for grant in grants}
    return {
        "manifest_version": 2,
        "canonicalization": JCS,
        "order_reference": order.reference,
        "lots": order.lots,
        "gpus": order.total_gpus,
        "duration_days": order.duration_days,
        "preparation": order.preparation.slug,
        "access": {
            "starts_at": _instant(order.active_since, "the rental's start"),
            "ends_at": _instant(order.ends_at, "the rental's end"),
        },
        "payment": {
            "chain_id": payment.chain_id,
            "asset": payment.asset.symbol,
            "contract": payment.contract,
            "address": payment.address,
            "amount_base_units": str(int(payment.amount_base_units)),
            "received_base_units": str(int(payment.received_base_units)),
            "credits": _credits(payment),
        },
        "preflight_bundle_sha256": node_bundle_sha256(),
        "nodes": [
            {
                "name": run.node.name,
                "host": by_node[run.node_id].host if run.node_id in by_node else run.node.host,
                "host_key_fingerprint": by_node[run.node_id].host_key_fingerprint if run.node_id in by_node else "",
                # The pinned key's known_hosts line, signed with the rest (null on a development node)
                "known_hosts_line": _known_hosts_line(by_node.get(run.node_id), order),
                "gpus": (run.report or {}).get("versions", {}).get("gpus"),
                "versions": (run.report or {}).get("versions"),
                "thresholds": (run.report or {}).get("thresholds"),
                "duration_s": (run.report or {}).get("duration_s"),
                "report_sha256": run.report_sha256,
                "report": run.report,
            }
            for run in runs
        ],
    }


def _known_hosts_line(grant: AccessGrant | None, order: Order) -> str | None:
    if grant is None:
        return None
    grant.order = order
    return known_hosts_line(grant)


def manifest_create(*, order: Order, runs: list[PreparationRun], grants: list[AccessGrant]) -> Manifest:
    # Stored as the signed JCS text reads back, so that the stored body holds exactly the signed numbers.
    body = json.loads(jcs_json(manifest_body(order, runs, grants)))
    signature = base64.b64encode(signing_key().sign(canonical_json(body))).decode()
    manifest, _ = Manifest.objects.update_or_create(
        order=order, defaults={"body": body, "signature": signature, "public_key": public_key_b64()}
    )
    return manifest


def manifest_revise(*, order: Order, extension_id: int) -> Manifest | None:
    """A new revision after an extension: the same evidence with the new end and the extensions' payments.
    Idempotent: a revision that already names this extension is not signed again. The caller holds the order's
    row lock."""
    manifest = Manifest.objects.filter(order=order).first()
    if manifest is None or extension_id in manifest.body.get("extension_ids", []):
        return manifest
    return _revision_sign(
        manifest, order=order, extra={"extension_ids": [*manifest.body.get("extension_ids", []), extension_id]}
    )


def manifest_change(
    *, order: Order, change_id: str, change: dict[str, Any], runs: list[PreparationRun] | None = None
) -> Manifest | None:
    """A new revision for a change of the rental other than an extension: a move to a spare node, a replaced SSH
    key, time given back. `change` (JSON: its `kind` and what a reader needs, e.g. both nodes of a move) is
    appended to the body's `changes`; `runs`, when given, are the passed runs whose nodes the rental is on now
    (their preflight evidence replaces the nodes'); else the signed nodes stay. The access section follows the
    order's current end and live grants. Idempotent by `change_id`. The caller holds the order's row lock."""
    manifest = Manifest.objects.filter(order=order).first()
    if manifest is None or change_id in manifest.body.get("change_ids", []):
        return manifest
    extra = {
        "changes": [*manifest.body.get("changes", []), {"id": change_id, **change}],
        "change_ids": [*manifest.body.get("change_ids", []), change_id],
    }
    return _revision_sign(manifest, order=order, extra=extra, runs=runs)


def _revision_sign(
    manifest: Manifest, *, order: Order, extra: dict[str, Any], runs: list[PreparationRun] | None = None
) -> Manifest:
    """Sign the next revision: the current evidence, `extra` on top, `previous_body_sha256` naming the revision it
    replaces (kept, signed, in `previous`)."""
    grants = list(order.access_grants.handed_over())
    if runs is None:
        passed = order.preparation_runs.filter(status=RunStatus.PASSED).select_related("node").order_by("node__name")
        body = manifest_body(order, list(passed), grants)
        body["nodes"] = manifest.body.get("nodes", body["nodes"])  # the preflight evidence stays what was signed
    else:
        body = manifest_body(order, runs, grants)
    body["extensions"] = _extensions_evidence(order)
    if manifest.body.get("access", {}).get("starts_at"):
        body["access"]["starts_at"] = manifest.body["access"]["starts_at"]
    for key in ("extension_ids", "changes", "change_ids"):  # what earlier revisions named stays named
        if key in manifest.body:
            body[key] = manifest.body[key]
    body.update(extra)
    body["revision"] = int(manifest.body.get("revision", 1)) + 1
    body["previous_body_sha256"] = hashlib.sha256(canonical_json(manifest.body)).hexdigest()
    previous = {"body": manifest.body, "signature": manifest.signature, "public_key": manifest.public_key}
    body = json.loads(jcs_json(body))
    signature = base64.b64encode(signing_key().sign(canonical_json(body))).decode()
    manifest.previous = [*manifest.previous, previous]
    manifest.body, manifest.signature, manifest.public_key = body, signature, public_key_b64()
    manifest.save(update_fields=["body", "signature", "public_key", "previous"])
    return manifest


def manifest_document(manifest: Manifest) -> dict[str, Any]:
    """What the customer downloads: the body, its signature, and how to check it."""
    return {
        "body": manifest.body,
        "signature": manifest.signature,
        "signature_algorithm": JCS_ALGORITHM if manifest.body.get("canonicalization") == JCS else LEGACY_ALGORITHM,
        "public_key": manifest.public_key,
        "body_sha256": hashlib.sha256(canonical_json(manifest.body)).hexdigest(),
        # Earlier revisions (before an extension moved the end), oldest first, each signed as it was issued.
        **({"previous": manifest.previous} if manifest.previous else {}),
    }

"""`b200` on the rented node (issue 41): the order's facts it shows the researcher, and their way to the node.

At the hand-over, and each time the end moves (an extension, time credited) or the data window opens, the
ACCESS_STATE job installs the `b200` command on each of the order's nodes (the access tool's `b200-install`) and
writes the order's facts there (`order-state`): reference, end, data window, cards, the validated environment
(the interpreter the preflight ran and the versions it reported), the manifest's SHA-256 and the hand-over's
figures. Only root writes them on the node; the account reads them (`b200 status`, the login's welcome).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from django.utils import timezone

from fleet.models import Node
from orders.models import Order, OrderStatus
from provisioning.access import _access_tool, _ensure_tool, access_tool_ready
from provisioning.data_window import data_until
from provisioning.drivers import driver_for
from provisioning.manifest import canonical_json
from provisioning.models import AccessGrant, PreparationRun, RunStatus

log = logging.getLogger(__name__)
VERSIONS = ("driver", "cuda", "torch", "nccl", "python")


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment else None


def _cards(node: Node, order: Order, versions: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's cards as its preflight saw them (the ranks' names), one entry per card it has."""
    names = list(versions.get("gpu_names") or [])
    return [
        {
            "index": index,
            "name": names[index] if index < len(names) else node.gpu_model,
            "memory_gb": order.gpu_memory_gb,
            "healthy": True,  # handed over only once its preflight passed; `b200 status` adds the live probe
        }
        for index in range(node.gpu_count)
    ]


def order_state_body(grant: AccessGrant) -> dict[str, Any]:
    """What `b200` reads on the grant's node (keys: CONTRACT.md, "On the node")."""
    order, node = grant.order, grant.node
    run = (
        PreparationRun.objects.filter(order=order, node=node, status=RunStatus.PASSED)
        .order_by("-finished_at", "-pk")
        .first()
    )
    report = (run.report if run else None) or {}
    versions = report.get("versions") or {}
    manifest = getattr(order, "manifest", None)
    ends_at = order.ends_at or grant.ends_at
    return {
        "reference": order.reference,
        "node": node.name,
        "language": order.language,
        "ends_at": _iso(ends_at),
        "data_until": _iso(grant.grace_until or data_until(ends_at)),
        "cards": _cards(node, order, versions),
        "environment": {"python": node.python, "versions": {key: versions.get(key) for key in VERSIONS}},
        "manifest_sha256": hashlib.sha256(canonical_json(manifest.body)).hexdigest() if manifest else None,
        "scratch": node.scratch_folders(),
        "report": {"duration_s": report.get("duration_s"), "checks": report.get("checks")},
        "written_at": timezone.now().isoformat(),
    }


def b200_state_on_nodes(*, order_id: int) -> int:
    """Install `b200` and write the order's facts on each node the order holds live access on. Idempotent: the
    facts are written whole each time. Returns how many nodes carry them."""
    order = Order.objects.filter(pk=order_id).first()
    if order is None or order.status != OrderStatus.ACTIVE:
        return 0
    grants = list(order.access_grants.live().handed_over().select_related("node", "order"))
    for grant in grants:
        body = json.dumps(order_state_body(grant), sort_keys=True).encode()
        with driver_for(grant.node) as driver:
            access_tool_ready(driver=driver, node=grant.node)
            _ensure_tool(driver)  # the modules b200 is installed from, beside an installed access tool too
            # b200 itself needs the standard library only: the node's python3, which every account may run (the
            # validated environment, `environment.python`, is what `b200 env` and `b200 trial` hand the researcher)
            _access_tool(driver, grant.node, "b200-install", "--source", driver.workdir, "--python", "python3")
            state = f"{driver.workdir}/order-state.json"
            driver.put_file(body, state, mode=0o644)
            _access_tool(driver, grant.node, "order-state", "--account", grant.account, "--file", state)
        log.info("b200 on %s: the facts of %s written", grant.node, order.reference)
    return len(grants)

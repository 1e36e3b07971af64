"""One read of an order for the customer: the API body and the status page share it."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest
from eth_utils import to_checksum_address

from orders.credit_lines import credits_api
from orders.models import Extension, Order, OrderStatus
from orders.order_links import order_status_path
from payments.checkout import order_first_payment
from payments.models import PaymentRequest, PaymentStatus, Refund
from payments.networks import finality_description
from payments.quotes import eip681_uri, format_units
from payments.refunds import CHANGEABLE
from payments.refunds_due import RefundDueJson
from provisioning.rented_node_health import order_nodes_health
from provisioning.ssh_setup import known_hosts_line, ssh_alias, ssh_config_block
from shop.order_version import OrderVersion

# While the payment can still move by itself, the order page refreshes itself.
LIVE_PAYMENT_STATUSES = (PaymentStatus.PENDING, PaymentStatus.DETECTED)


def payment_representation(order: Order, version: OrderVersion) -> dict[str, Any]:
    """The order's first payment, its notices and transactions as the version query found them."""
    payment = order_first_payment(order)
    return payment_fields(
        payment, notices=version.notices.get(payment.pk, 0), tx_hashes=version.tx_hashes.get(payment.pk, [])
    )


def payment_fields(payment: PaymentRequest, *, notices: int, tx_hashes: list[str] | None = None) -> dict[str, Any]:
    """One payment request (the order's first, or an extension's), as the customer sees it. Without
    `tx_hashes`, the counted transfers are read from its (prefetched) credits."""
    asset = payment.asset
    missing = max(0, int(payment.amount_base_units) - int(payment.received_base_units))
    if tx_hashes is None:
        tx_hashes = sorted({credit.tx_hash for credit in payment.credits.all() if credit.counted})
    return {
        "network": asset.network.slug,
        "network_name": asset.network.name,
        "chain_id": payment.chain_id,
        "asset": asset.symbol,
        "contract": payment.contract,
        "decimals": payment.decimals,
        "address": payment.address,
        "amount": format_units(payment.amount_base_units, payment.decimals),
        "amount_base_units": str(int(payment.amount_base_units)),
        "amount_usd": str(payment.amount_usd),
        "usd_rate": format(payment.usd_rate.normalize(), "f"),
        "expires_at": payment.expires_at,
        "uri": eip681_uri(
            contract=payment.contract,
            chain_id=payment.chain_id,
            address=payment.address,
            base_units=int(payment.amount_base_units),
        ),
        "status": payment.status,
        "status_label": payment.get_status_display(),
        "received_base_units": str(int(payment.received_base_units)),
        "confirmations": payment.confirmations,
        # What the page says: never "4 of 2" (blocks keep coming while a payment waits on a person)
        "confirmations_shown": min(payment.confirmations, asset.network.confirmations_required or 1 << 31),
        # Under a safe or finalized rule no count of blocks makes a transfer final: no "n of N" then.
        "confirmations_required": None if asset.network.finality_tag else asset.network.confirmations_required,
        "finality": asset.network.finality_rule,
        "finality_wait_seconds": asset.network.finality_wait_seconds,
        "finality_text": finality_description(asset.network),
        "received": format_units(payment.received_base_units, payment.decimals),
        "missing": format_units(missing, payment.decimals),
        "missing_usd": str(worth_in_usd(payment, missing)),
        # Seen (or confirmed) but less than the quote: the card asks for the rest (shop.order_story.short)
        "short": payment.status in (PaymentStatus.DETECTED, PaymentStatus.UNDERPAID)
        and int(payment.received_base_units) < int(payment.amount_base_units),
        "refunds_due": [_refund_due(entry) for entry in payment.refunds_due],
        "tx_hashes": tx_hashes,
        "notices": notices,
        "watching": payment.status in LIVE_PAYMENT_STATUSES,
    }


def worth_in_usd(payment: PaymentRequest, base_units: int) -> Decimal:
    """What part of the quote `base_units` is, in USD at the quote's own price (the whole amount is worth
    `amount_usd` exactly): a missing 4,740 of 7,900 USDC is worth 4,740.00 USD, not the order's total."""
    quoted = int(payment.amount_base_units)
    if quoted <= 0:
        return Decimal("0.00")
    return (payment.amount_usd * base_units / quoted).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def _refund_due(entry: RefundDueJson) -> dict[str, object]:
    """An amount due back in one asset; a token the shop does not sell has no known decimals."""
    decimals = entry["decimals"]
    return {**entry, "amount": None if decimals is None else format_units(int(entry["base_units"]), decimals)}


def refund_representation(refund: Refund) -> dict[str, Any]:
    decimals = refund.decimals
    return {
        "id": refund.pk,
        "reason": refund.reason,
        "reason_label": refund.get_reason_display(),
        "asset": refund.symbol or None,
        "contract": to_checksum_address(refund.token_contract) if refund.token_contract else None,
        "network": refund.network.slug,
        "network_name": refund.network.name,
        "amount_base_units": str(int(refund.amount_base_units)),
        "amount": None if decimals is None else format_units(int(refund.amount_base_units), decimals),
        "to_address": refund.to_address or None,
        "status": refund.status,
        "status_label": refund.get_status_display(),
        "address_changeable": refund.status in CHANGEABLE,
        "tx_hash": refund.tx_hash or None,
    }


def order_representation(order: Order, *, token: str, request: HttpRequest, version: OrderVersion) -> dict[str, Any]:
    """The body of the API and the data of the page. The version query already told which related rows exist,
    so an order without refunds, extensions or access asks for none of them."""
    return {
        "reference": order.reference,
        "access_token": token,
        "status_url": request.build_absolute_uri(order_status_path(order)),
        "status": order.status,
        "status_label": order.get_status_display(),
        "lots": order.lots,
        "total_gpus": order.total_gpus,
        "gpu_model": order.gpu_model,
        "gpu_memory_gb_per_card": order.gpu_memory_gb,
        "duration_days": order.duration_days,
        "preparation": order.preparation.slug,
        "total_usd": str(order.total_usd),
        "hypothesis_kind": order.hypothesis_kind,
        "hypothesis": order.hypothesis_text,
        "created_at": order.created_at,
        "payment": payment_representation(order, version),
        # Every payment's: the first one's and each extension's.
        "refunds": [
            refund_representation(refund)
            for refund in Refund.objects.filter(payment__order=order).select_related("network")
        ]
        if version.has("r")
        else [],
        "extensions": extensions_representation(order) if version.has("e") else [],
        "access": access_representation(order) if version.has("g") else None,
        # The latest health probe of each rented node (provisioning/rented_node_health.py): healthy, or what is
        # wrong, and when.
        "nodes_health": order_nodes_health(order) if order.status == OrderStatus.ACTIVE and version.has("g") else [],
        # Time given back (downtime) or adjusted by staff: only a rental that ran has any (no query before).
        "credits": credits_api(order) if order.status in (OrderStatus.ACTIVE, OrderStatus.ENDED) else [],
        "downtime_credit_cap_hours": settings.DOWNTIME_CREDIT_CAP_HOURS,
        "manifest_url": (
            request.build_absolute_uri(order_status_path(order) + "manifest.json")
            if order.status in (OrderStatus.ACTIVE, OrderStatus.ENDED) and version.has("m")
            else None
        ),
        "preparation_progress": version.runs
        if order.status in (OrderStatus.PREPARING, OrderStatus.PREPARATION_FAILED)
        else [],
    }


def extension_representation(extension: Extension, *, notices: int) -> dict[str, Any]:
    return {
        "id": extension.pk,
        "duration_days": extension.duration_days,
        "lots": extension.lots,
        "total_usd": str(extension.total_usd),
        "status": extension.status,
        "status_label": extension.get_status_display(),
        "created_at": extension.created_at,
        "applied_at": extension.applied_at,
        "ends_at": extension.ends_at_after,
        "payment": payment_fields(extension.payment, notices=notices),
    }


def extensions_representation(order: Order) -> list[dict[str, Any]]:
    """The order's extensions, oldest first, each with its payment (a fixed number of queries)."""
    if order.status not in (OrderStatus.ACTIVE, OrderStatus.ENDED):
        return []  # opened only while the rental runs: an order that never ran has none (no query)
    extensions = (
        Extension.objects.filter(order=order)
        .select_related("payment__asset__network")
        .prefetch_related("payment__credits")
        .annotate(notices=Count("payment__notices"))
        .order_by("created_at", "pk")
    )
    return [extension_representation(extension, notices=extension.notices) for extension in extensions]


def access_representation(order: Order) -> dict[str, Any] | None:
    """Host, port, user, the host-key fingerprint, the ssh command and the end, once access works."""
    if order.status != OrderStatus.ACTIVE:
        return None
    grants = list(order.access_grants.handed_over().select_related("node").order_by("node__name"))
    if not grants:
        return None
    for grant in grants:
        grant.order = order  # (the alias names it: no query per node)
    nodes = [
        {
            "host": g.host,
            "port": g.port,
            "user": g.account,
            "host_key_fingerprint": g.host_key_fingerprint,
            "ssh_command": g.ssh_command,
            # SSH that works on the first try (provisioning/ssh_setup.py): null where the node has no pinned key
            "alias": ssh_alias(g),
            "known_hosts_line": known_hosts_line(g),
            "ssh_config": ssh_config_block(g),
            "ends_at": order.ends_at,
            # After the end: read-only SFTP until then (provisioning/data_window.py), null before the window opens.
            "data_until": g.grace_until,
            "sftp_command": g.sftp_command,
            "scp_command": g.scp_command,
        }
        for g in grants
    ]
    return {**nodes[0], "nodes": nodes}

"""Rows stored directly, for tests about a model's own rules and for tests that need an order, a node or a payment
in a given state without a chain, a quote or the API (the builders: `an_order`, `a_node`, `a_payment`).

The builders write what placing an order writes (shop/placement.py: the order and its first event, a hold per lot,
the payment request at the next deposit address, the "order received" email), then move the rows to the state asked
for through the domain's own writers (`order_transition`, `payment_transition`), so that every move has its event
row. The nodes they hold are left as they are: their states are provisioning's to move (`a_node(state=...)`).
"""

from __future__ import annotations

import datetime as dt
import itertools
import secrets
from decimal import Decimal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.jobs.models import Job
from fleet.models import Node, NodeEvent, NodeState
from orders import capacity
from orders.models import Duration, LotSpec, Order, OrderEvent, OrderStatus, Preparation, Reservation
from orders.order_links import order_access_token
from orders.orders import new_reference, order_transition
from orders.outbox import email_enqueue
from orders.sshkeys import parse_ssh_public_key
from payments.checkout import PreparedQuote, payment_deadline, payment_request_open
from payments.lifecycle import payment_transition
from payments.models import Asset, PaymentRequest, PaymentStatus
from payments.quotes import UsdRate, to_base_units

S = OrderStatus


def order_stored(*, reference: str = "B2-TEST-0001", days: int = 7) -> Order:
    """An order for one lot of the catalog's B200 pair, as the wizard would have stored it."""
    duration = Duration.objects.get(days=days)
    return Order.objects.create(
        reference=reference,
        access_nonce=reference.encode().hex()[:32].ljust(32, "0"),  # one per reference: nonces are unique
        lots=1,
        duration=duration,
        preparation=Preparation.objects.get(slug="pytorch-blackwell"),
        duration_days=duration.days,
        gpu_model="NVIDIA B200",
        gpus_per_lot=2,
        gpu_memory_gb=180,
        price_per_lot_usd=duration.price_per_lot_usd,
        total_usd=duration.price_per_lot_usd,
        first_name="Ada",
        last_name="Lovelace",
        email="ada@example.org",
        ssh_public_key="ssh-ed25519 AAAA test",
        ssh_key_fingerprint="SHA256:test",
        terms_accepted_at=timezone.now(),
    )


def jobs_lost(*, seconds_ago: float = 600, **filters) -> int:
    """Open jobs whose send never reached a worker (the broker was down at commit), made `seconds_ago`: beat's
    sweep sends them again. Returns how many."""
    since = timezone.now() - dt.timedelta(seconds=seconds_ago)
    return Job.objects.open().filter(**filters).update(created_at=since, due_at=since, claimed_until=None)


# The builders

_NODE_NUMBERS = itertools.count(1)


def a_node(*, state: str = NodeState.AVAILABLE, **fields) -> Node:
    """A node on this machine (the local driver) in `state`; a state other than available has its event row, as
    provisioning's writer leaves it. A test whose node runs the access tool asks for `make_node` (tests/conftest.py)
    instead: its accounts live in a sandboxed user database."""
    number = next(_NODE_NUMBERS)
    defaults = {"name": f"built-node-{number}", "driver": "local", "host": "127.0.0.1"}
    node = Node.objects.create(**{**defaults, **fields, "state": state})
    if state != NodeState.AVAILABLE:
        NodeEvent.objects.create(
            node=node, from_state=NodeState.AVAILABLE, to_state=state, actor="operator", reason="stored for a test"
        )
    return node


def ssh_public_key_line(comment: str = "researcher@lab") -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return f"{line} {comment}"


# The way from a new order (awaiting payment) to each status, through the order's status table.
ORDER_PATHS: dict[str, tuple[str, ...]] = {
    S.AWAITING_PAYMENT: (),
    S.PAYMENT_REPORTED: (S.PAYMENT_REPORTED,),
    S.PAID: (S.PAID,),
    S.NEEDS_REVIEW: (S.NEEDS_REVIEW,),
    S.EXPIRED: (S.EXPIRED,),
    S.CANCELLED: (S.CANCELLED,),
    S.PREPARING: (S.PAID, S.PREPARING),
    S.PREPARATION_FAILED: (S.PAID, S.PREPARING, S.PREPARATION_FAILED),
    S.ACTIVE: (S.PAID, S.PREPARING, S.ACTIVE),
    S.ENDED: (S.PAID, S.PREPARING, S.ACTIVE, S.ENDED),
}
# Statuses whose money was accepted: their first payment is confirmed and their holds open-ended.
_PAID_STATUSES = {S.PAID, S.PREPARING, S.PREPARATION_FAILED, S.ACTIVE, S.ENDED}
# Statuses whose lots were given back.
_RELEASED_STATUSES = {S.EXPIRED, S.CANCELLED, S.ENDED}


def an_order(
    *,
    status: str = S.AWAITING_PAYMENT,
    lots: int = 1,
    days: int = 7,
    nodes: list[Node] | None = None,
    asset: Asset | None = None,
    now: dt.datetime | None = None,
    **fields,
) -> Order:
    """An order for `lots` lots of `days` days, as placing it stores it, then moved to `status`. It holds `nodes`
    (else as many new ones, `a_node`); it is paid in `asset` (else ETH on the local chain); `fields` override the
    order's own (`language`, `email`, `ssh_public_key`...). The order carries its secret link's `token`.

    Paid and later: its first payment is confirmed and its holds are open-ended, as the payment outcome leaves them;
    active: its rental runs from `now` for its days; expired, cancelled and ended: its holds are released."""
    now = now or timezone.now()
    nodes = nodes if nodes is not None else [a_node() for _ in range(lots)]
    assert len(nodes) == lots, "one node a lot"
    duration = Duration.objects.get(days=days)
    lot = LotSpec.current()
    key = fields.pop("ssh_public_key", None) or ssh_public_key_line()
    with transaction.atomic():
        order = Order.objects.create(
            reference=new_reference(),
            access_nonce=secrets.token_hex(16),
            status=S.AWAITING_PAYMENT,
            created_at=now,
            lots=lots,
            duration=duration,
            preparation=Preparation.objects.get(slug=fields.pop("preparation", "pytorch-blackwell")),
            duration_days=duration.days,
            gpu_model=lot.gpu_model,
            gpus_per_lot=lot.gpus_per_lot,
            gpu_memory_gb=lot.gpu_memory_gb,
            price_per_lot_usd=duration.price_per_lot_usd,
            total_usd=duration.price_per_lot_usd * lots,
            **{
                "first_name": "Ada",
                "last_name": "Lovelace Byron",
                "email": "ada@example.org",
                "ssh_public_key": parse_ssh_public_key(key).line,
                "ssh_key_fingerprint": parse_ssh_public_key(key).fingerprint,
                "hypothesis_kind": "bigger_batch",
                "hypothesis_text": "A global batch of 2048 fits when sharded.",
                "language": "en",
                "terms_accepted_at": now,
                **fields,
            },
        )
        OrderEvent.objects.create(
            order=order, created_at=now, to_status=S.AWAITING_PAYMENT, actor="customer", reason="order placed"
        )
        Reservation.objects.bulk_create(
            [Reservation(order=order, node=node, created_at=now, expires_at=payment_deadline(now)) for node in nodes]
        )
        payment = a_payment(order, now=now, asset=asset)
        email_enqueue(order_id=order.pk, name="order_received")
        order_moved(order, status, now=now, payment=payment)
    order.token = order_access_token(order)
    return order


def order_moved(order: Order, status: str, *, now: dt.datetime | None = None, payment=None) -> Order:  # noqa: ANN001
    """Move a new order (awaiting payment) along ORDER_PATHS to `status` through its transition writer, with what
    each step leaves behind (the payment confirmed, the holds open-ended or released, the rental clock)."""
    now = now or timezone.now()
    payment = payment or order.payment
    with transaction.atomic():
        for step in ORDER_PATHS[status]:
            if step == S.PAID:
                payment_moved(payment, PaymentStatus.CONFIRMED, now=now)
                order.reservations.live().update(expires_at=None)
            if step == S.ACTIVE:
                order.active_since = now
                order.ends_at = now + dt.timedelta(days=order.duration_days)
                order.save(update_fields=["active_since", "ends_at"])
            actor = "customer" if step == S.PAYMENT_REPORTED else "system"
            order_transition(order=order, to=step, actor=actor, reason="stored for a test", now=now)
        if status in _RELEASED_STATUSES:
            capacity.release_lots(order=order, now=now, reason=f"{status} in a test")
    return order


def a_payment(
    order: Order,
    *,
    status: str = PaymentStatus.PENDING,
    extension=None,  # noqa: ANN001 - orders.models.Extension
    asset: Asset | None = None,
    now: dt.datetime | None = None,
) -> PaymentRequest:
    """A payment request for the order (or one of its extensions) at the next deposit address, quoted without a
    chain (the development chain's fixed rate, 1 for a stablecoin), then moved to `status` with the figures that
    status shows (confirmed: the whole amount, its confirmations, settled)."""
    now = now or timezone.now()
    asset = asset or Asset.objects.select_related("network").get(network__slug="local", symbol="ETH")
    amount_usd = extension.total_usd if extension is not None else order.total_usd
    rate = UsdRate(Decimal(1), None) if asset.usd_stable else UsdRate(Decimal(settings.DEV_NATIVE_USD_RATE), now)
    quote = PreparedQuote(
        asset=asset,
        amount_usd=amount_usd,
        rate=rate,
        amount_base_units=to_base_units(amount_usd, rate, asset.decimals),
        start_block=0,
    )
    with transaction.atomic():
        payment = payment_request_open(order=order, quote=quote, now=now, extension=extension)
        if extension is None:
            order.payment = payment
        return payment_moved(payment, status, now=now)


def payment_moved(payment: PaymentRequest, status: str, *, now: dt.datetime | None = None) -> PaymentRequest:
    """The payment moved to `status` through its writer, with the figures that status shows."""
    now = now or timezone.now()
    if status == payment.status:
        return payment
    amount = int(payment.amount_base_units)
    received = {
        PaymentStatus.PENDING: 0,
        PaymentStatus.UNDERPAID: amount // 2,
        PaymentStatus.OVERPAID: amount * 2,
    }.get(status, amount)
    payment.received_base_units = received
    payment.confirmations = payment.asset.network.confirmations_required if status != PaymentStatus.PENDING else 0
    settled = status in (PaymentStatus.CONFIRMED, PaymentStatus.OVERPAID)
    payment.settled_at = now if settled else None
    payment.holds_money = received > 0
    payment.save(update_fields=["received_base_units", "confirmations", "settled_at", "holds_money"])
    payment_transition(payment=payment, to=status, actor="system", reason="stored for a test", now=now)
    return payment


def placed_body(order: Order) -> dict:
    """What the API's 201 body says of a built order that a test reads back: its reference, its token, its page."""
    from orders.order_links import order_status_path

    return {"reference": order.reference, "access_token": order.token, "status_url": order_status_path(order)}

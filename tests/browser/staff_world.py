"""The shop the staff walks (test_staff.py) work on, seeded through the real code paths: orders placed through the
API, paid on the local anvil chain and found by one scan; late payments in review (one per language), an overpaid
order whose refund waits for a reviewer and one whose refund is approved for the signer, a paid order; a preparation
running (its run at the GPU preflight, no worker on it) and three nodes out of sale, one with a long reason."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.test import Client
from django.utils import timezone

from tests.browser.conftest import order_placed, paid_on_the_chain

LANGUAGES = ["en", "es", "fr"]
CUSTOMER_WALLET = "0x52908400098527886E0F7030069857D2E4169EE7"
REASONS = {"review": "the transfer is on the explorer, five minutes late", "refund": "the excess is on the explorer"}
# Nodes out of sale, with the reason an operator typed: the last one long, as a detail that squeezed the console's
# other columns until "Handle" broke over three lines at 1280 px.
NODES_OUT = {
    "staff-node-6": ("maintenance", "fans replaced, waiting for the vendor's sign-off"),
    "staff-node-7": ("failed", "the card in slot 2 fell off the bus during the last recheck"),
    "staff-node-8": (
        "maintenance",
        "the rack's power distribution unit is being replaced by the datacentre; the node stays out of sale until "
        "the electrician has signed the work off and a full recheck of both cards has passed on the new supply",
    ),
}
PREFLIGHT_LOG = "connected to 127.0.0.1\ncopied the preflight bundle\nthe environment is set up"


class World:
    """What the seed made: each language's late payment, the refunds, the operator's paid order, the preparation
    running (its run)."""

    def __init__(self) -> None:
        self.late: dict[str, object] = {}  # language -> its late PaymentRequest
        self.refund_pending = None
        self.refund_approved = None
        self.paid = None
        self.run = None


def place(shop, order_payload, language: str) -> tuple[dict, object]:
    """An order for one lot in USDC, placed through the API: (its 201 body, its payment request)."""
    from payments.models import PaymentRequest

    placed = order_placed(shop, order_payload, language=language)
    return placed, PaymentRequest.objects.get(order__reference=placed["reference"])


def seed(shop, order_payload) -> World:
    """Three late payments in full (one per language), two overpaid orders (one refund waiting for a reviewer,
    one approved for the signer) and an order paid exactly, all sent on the chain and found by one scan."""
    from payments.models import PaymentRequest, Refund
    from payments.refunds import refund_decide
    from provisioning.models import Node

    for number in range(6):  # a lot each, beside the shop's own node
        Node.objects.create(name=f"staff-node-{number}", driver="local", host="127.0.0.1", gpu_count=2)
    world = World()
    sent = []
    for language in LANGUAGES:
        _placed, payment = place(shop, order_payload, language)
        PaymentRequest.objects.filter(pk=payment.pk).update(expires_at=timezone.now() - dt.timedelta(minutes=5))
        world.late[language] = payment
        sent.append((payment, None))
    overpaid = [place(shop, order_payload, "en") for _ in range(2)]
    sent += [(payment, payment.amount + Decimal("2.5")) for _placed, payment in overpaid]
    paid_body, world.paid = place(shop, order_payload, "en")
    sent.append((world.paid, None))
    paid_on_the_chain(shop, *sent)
    # The customers give their refund address on the order page (the API); a reviewer approved one of them
    refunds = []
    for placed, payment in overpaid:
        refund = Refund.objects.get(payment=payment)
        given = Client().post(
            f"/api/v1/orders/{placed['reference']}/refunds/{refund.pk}/address/",
            {"address": CUSTOMER_WALLET},
            content_type="application/json",
            headers={"X-Order-Token": placed["access_token"]},
        )
        assert given.status_code == 200, given.content
        refunds.append(refund)
    world.refund_pending, world.refund_approved = refunds
    refund_decide(
        refund_id=world.refund_approved.pk,
        approve=True,
        reviewer="ana",
        reason=REASONS["refund"],
        to_address=CUSTOMER_WALLET,
    )
    world.run = preparation_running(world.refund_approved.payment.order)
    nodes_out_of_sale()
    for payment in world.late.values():
        payment.refresh_from_db()
        assert (payment.status, payment.order.status) == ("late", "needs_review"), payment
    world.paid.refresh_from_db()
    assert world.paid.order.status == "paid"
    return world


def preparation_running(order):
    """The order's preparation as a worker leaves it mid-way (no job: nothing moves it on): its run on the node it
    holds, at the GPU preflight."""
    from django.db import transaction

    from orders.orders import order_transition
    from provisioning.models import PreparationRun
    from provisioning.states import node_transition

    with transaction.atomic():
        node = order.reservations.live().get().node
        order_transition(order=order, to="preparing", actor="olga", reason="prepare")
        node_transition(node=node, to="preparing", actor="olga", reason="prepare")
        return PreparationRun.objects.create(
            order=order, node=node, status="running", step="running the GPU preflight", progress=40,
            log=PREFLIGHT_LOG, requested_by="olga", attempt=1, started_at=timezone.now(),
        )  # fmt: skip


def nodes_out_of_sale() -> None:
    from provisioning.models import Node
    from provisioning.states import node_state_set

    for name, (state, reason) in NODES_OUT.items():
        node = Node.objects.create(name=name, driver="local", host="127.0.0.1", gpu_count=2)
        node_state_set(node_id=node.pk, to=state, actor="olga", reason=reason)


def as_written(order_payload):
    """What stays as it was written in every language (EnglishLeft): what people typed, the records the system
    keeps (events' reasons and actors, the run's log), the names of chains and of nodes' drivers (local, ssh)."""
    from orders.models import OrderEvent
    from payments.models import Network, PaymentEvent, RefundEvent
    from provisioning.models import Node, NodeEvent

    def written() -> list[str]:
        typed = [reason for _state, reason in NODES_OUT.values()] + list(REASONS.values())
        typed += [order_payload["hypothesis"], order_payload["last_name"], *PREFLIGHT_LOG.split("\n")]
        for events in (OrderEvent, PaymentEvent, RefundEvent, NodeEvent):
            for reason, actor in events.objects.values_list("reason", "actor"):
                typed += [reason, actor]
        drivers = [f"({driver})" for driver in Node.objects.values_list("driver", flat=True)]
        return [*typed, *Network.objects.values_list("name", flat=True), *drivers]

    return written

"""A refund's time in the ledger (`sent_at`) is stamped by its writer at its first move to sent, or straight to
confirmed, which the table allows; a reorg that sends it back to approved and on again keeps the first time. The
database refuses a sent refund without one."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from payments.models import Asset, PaymentRequest, Refund
from payments.refunds import refund_transition
from tests.stored_rows import order_stored

pytestmark = pytest.mark.django_db
NOW = timezone.now()


@pytest.fixture
def approved() -> Refund:
    order = order_stored()
    asset = Asset.objects.select_related("network").get(network__slug="local", symbol="ETH")
    payment = PaymentRequest.objects.create(
        order=order, asset=asset, chain_id=asset.network.chain_id, decimals=18, key_fingerprint="test",
        derivation_index=7, address="0x" + "07" * 20, amount_usd=order.total_usd, usd_rate=1,
        amount_base_units=10**18, expires_at=NOW, start_block=0,
    )  # fmt: skip
    return Refund.objects.create(
        payment=payment, reason="overpaid", network=asset.network, chain_id=payment.chain_id, symbol="ETH",
        decimals=18, amount_base_units=10**17, to_address="0x" + "33" * 20, status="approved",
    )  # fmt: skip


def move(refund: Refund, to: str, minutes: int) -> None:
    with transaction.atomic():
        refund_transition(refund=refund, to=to, actor="scan", reason="a test", now=NOW + dt.timedelta(minutes=minutes))
    refund.refresh_from_db()


def test_the_first_send_is_the_ledgers_time_through_a_reorg_and_the_confirmation(approved):
    move(approved, "sent", 1)
    move(approved, "approved", 2)  # a reorg took the transfer away
    move(approved, "sent", 3)
    move(approved, "confirmed", 4)

    assert approved.sent_at == NOW + dt.timedelta(minutes=1)


def test_a_refund_confirmed_straight_from_approved_gets_its_time_too(approved):
    move(approved, "confirmed", 5)

    assert (approved.status, approved.sent_at) == ("confirmed", NOW + dt.timedelta(minutes=5))


def test_the_database_refuses_a_sent_refund_without_a_time(approved):
    with pytest.raises(IntegrityError), transaction.atomic():
        Refund.objects.filter(pk=approved.pk).update(status="sent")

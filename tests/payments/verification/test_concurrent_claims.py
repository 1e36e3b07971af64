"""Twenty "I have paid" at once for one order, with verifier passes racing them: one credit per transfer."""

from __future__ import annotations

import pytest
from django.test import Client

from payments.models import Credit, Network, Notice
from payments.scan import scan_network
from tests.payments.test_capacity_race import run_together
from tests.payments.verification.helpers import ORDERS_URL, order_of, payment_of, units

race = pytest.mark.django_db(transaction=True, serialized_rollback=True)
CLAIMS = 20
SCANNERS = 4


@race
def test_twenty_i_have_paid_at_once_and_concurrent_scans_credit_the_transfer_once(chain, customer):
    # Given an order paid in full with one USDC transfer, confirmed on the chain
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(3)
    network = Network.objects.get(slug="local")

    # When 20 "I have paid" (with the tx hash) and 4 verifier passes all run at the same instant
    def attempt(slot: int):
        if slot < SCANNERS:
            return scan_network(network=Network.objects.get(pk=network.pk))
        return Client().post(
            f"{ORDERS_URL}{placed['reference']}/paid/",
            {"tx_hash": sent.tx_hash},
            content_type="application/json",
            headers={"X-Order-Token": placed["access_token"]},
        )

    slots = iter(range(CLAIMS + SCANNERS))
    results = run_together(lambda: attempt(next(slots)), contenders=CLAIMS + SCANNERS)

    # Then every notice is heard, and no request or pass failed
    errors = [result for result in results if isinstance(result, Exception)]
    assert not errors, errors
    claims = [result for result in results if hasattr(result, "status_code")]
    assert [response.status_code for response in claims] == [202] * CLAIMS
    assert Notice.objects.filter(payment=payment_of(placed)).count() == CLAIMS
    # And the transfer is one credit, the order paid once
    assert list(Credit.objects.values_list("tx_hash", "amount_base_units")) == [(sent.tx_hash.lower(), units(placed))]
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(units(placed))
    moves_to_paid = [event for event in order_of(placed).events.all() if event.to_status == "paid"]
    assert len(moves_to_paid) == 1

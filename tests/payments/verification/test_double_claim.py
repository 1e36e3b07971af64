"""One transaction pays at most one order: claiming it on a second order credits nothing there."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from payments.models import Credit, Notice
from tests.payments.verification.helpers import order_of, payment_of, units

# Every RPC read goes through a provider with tight limits (small log ranges and batches, 429s): issue 26.
pytestmark = pytest.mark.usefixtures("tight_provider")


def test_a_tx_hash_claimed_by_two_orders_pays_only_the_order_it_was_sent_to(chain, customer, scan_pass):
    # Given two orders for the same amount, and one transfer to order A's address
    order_a = customer.order()
    order_b = customer.order()
    assert units(order_a) == units(order_b)
    sent = chain.wallet.pay_token(chain.usdc, order_a["payment"]["address"], units(order_a))
    chain.mine(1)

    # When both customers press "I have paid" with that same hash, B first, and the verifier passes
    claim_b = customer.paid(order_b, sent.tx_hash)
    claim_a = customer.paid(order_a, sent.tx_hash)
    scan_pass()

    # Then both claims are heard, but the transfer is credited once, to A, which is paid
    assert (claim_a.status_code, claim_b.status_code) == (202, 202)
    assert list(Credit.objects.values_list("payment__order__reference", "tx_hash")) == [
        (order_a["reference"], sent.tx_hash.lower())
    ]
    assert (customer.read(order_a)["status"], customer.read(order_a)["payment"]["status"]) == ("paid", "confirmed")
    # And B still waits for its own money, told what its hash pays
    seen_b = customer.read(order_b)
    assert seen_b["payment"]["status"] == "pending"
    assert (seen_b["payment"]["received_base_units"], seen_b["payment"]["tx_hashes"]) == ("0", [])
    assert seen_b["status"] == "payment_reported"
    assert "pays another address" in Notice.objects.get(payment=payment_of(order_b)).result


def test_the_database_refuses_a_second_credit_for_the_same_transfer(chain, customer):
    # Given a transfer credited to order A
    order_a = customer.order()
    order_b = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, order_a["payment"]["address"], units(order_a))
    customer.paid(order_a, sent.tx_hash)
    credit = Credit.objects.get()

    # When anything tries to store the same (chain id, tx hash, log index) again, even for order B
    with pytest.raises(IntegrityError), transaction.atomic():
        Credit.objects.create(
            payment=payment_of(order_b),
            network=credit.network,
            asset=credit.asset,
            chain_id=credit.chain_id,
            tx_hash=credit.tx_hash,
            log_index=credit.log_index,
            block_number=credit.block_number,
            block_hash=credit.block_hash,
            block_timestamp=credit.block_timestamp,
            sender=credit.sender,
            amount_base_units=credit.amount_base_units,
            kind=credit.kind,
        )

    # Then the database keeps the one credit, and B is not paid
    assert Credit.objects.count() == 1
    assert order_of(order_b).status == "awaiting_payment"
    assert payment_of(order_b).received_base_units == 0

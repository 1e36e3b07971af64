"""An order whose start block is the head the scan recorded a moment ago, not the chain's height at placement:
the customer's transfer, sent after the order, still counts and pays it."""

from __future__ import annotations

from payments.models import Network
from payments.networks import network_health_record
from tests.payments.verification.helpers import order_of, payment_of, units


def test_a_transfer_sent_after_an_order_placed_from_a_recorded_head_pays_it(chain, customer, scan_pass):
    # Given the head recorded a moment ago (as a scan pass records it), and the chain a few blocks further on since
    recorded = chain.head()
    network_health_record(network=Network.objects.get(slug="local"), ok=True, head=recorded)
    chain.mine(3)

    # When an order is placed (no request to the chain: the recorded head is fresh)
    placed = customer.order()

    # Then it is watched from the recorded head, below the chain's height
    assert payment_of(placed).start_block == recorded < chain.head()

    # When the customer pays and the transfer confirms
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()

    # Then the payment counts in full and the order is paid
    assert payment_of(placed).status == "confirmed"
    assert order_of(placed).status == "paid"

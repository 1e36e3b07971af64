"""A scan pass costs the same JSON-RPC calls for 1 and for 200 open orders: calls grow with block ranges,
not with the number of deposit addresses watched (see bench/scan_rpc_calls.py for larger counts). The one cost
per address is the coin check, every COIN_CHECK_SECONDS: two calls an address (bench/scan_budget.py)."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from payments.models import Asset, Network, PaymentRequest, ScanCursor
from payments.native import FULL_BLOCKS_PER_REQUEST
from payments.networks import rpc_client
from payments.scan import PassReport, scan_network
from tests.payments.verification.helpers import units
from tests.perf.bulk import FIRST_BULK_INDEX, open_orders_bulk

BLOCKS = 20  # blocks mined between the transfers and the pass, the same in every run


def counted_pass(chain, customer, *, open_orders: int, first_index: int) -> tuple[int, int, PassReport]:
    """One paid order (two transfers) among `open_orders` open ones: (JSON-RPC calls, HTTP requests, report)."""
    network = Network.objects.get(slug="local")
    # earlier runs: closed, and their money gone (no longer watched)
    PaymentRequest.objects.update(watch_until=timezone.now() - dt.timedelta(days=1), holds_money=False)
    start = chain.head()
    placed = customer.order()
    usdc = Asset.objects.select_related("network").get(network__slug="local", symbol="USDC")
    open_orders_bulk(open_orders - 1, asset=usdc, first_index=first_index, start_block=start)
    assert PaymentRequest.objects.filter(watch_until__gte=timezone.now()).count() == open_orders
    half = units(placed) // 2
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], half)
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) - half)
    chain.mine(BLOCKS)
    # A pass between two coin checks (a check was just made), as most passes are
    just_checked = {"next_block": start, "coin_checked_at": timezone.now()}
    ScanCursor.objects.update_or_create(network=network, defaults=just_checked)
    FULL_BLOCKS_PER_REQUEST.forget()  # both passes size their full-block requests from the same start
    client = rpc_client(network)
    report = scan_network(network=network, client=client)
    assert PaymentRequest.objects.get(order__reference=placed["reference"]).status == "confirmed"
    return client.calls, client.requests, report


def test_a_scan_pass_makes_the_same_rpc_calls_for_1_and_for_200_open_orders(chain, customer, settings):
    settings.COIN_CHECK_SECONDS = 600  # production's
    # Given one open order paid by two transfers, alone on the chain
    calls_1, requests_1, report_1 = counted_pass(chain, customer, open_orders=1, first_index=FIRST_BULK_INDEX)

    # When the same payment is scanned among 200 open orders, over as many blocks
    calls_200, requests_200, report_200 = counted_pass(
        chain, customer, open_orders=200, first_index=FIRST_BULK_INDEX + 1
    )

    # Then both passes read the same number of blocks, credited the same transfers, and cost the same calls
    assert report_1.to_block - report_1.from_block == report_200.to_block - report_200.from_block
    assert (report_1.logs, report_1.credited) == (report_200.logs, report_200.credited) == (2, 2)
    assert (calls_200, requests_200) == (calls_1, requests_1)
    # head, chain id, safe, one batch of two eth_getLogs (transfers in and out), the blocks of the range read in
    # full once for the new address (native coin in and out, batched), and the two credits' receipts
    blocks = report_1.to_block - report_1.from_block + 1
    assert calls_1 <= 5 + blocks + 2

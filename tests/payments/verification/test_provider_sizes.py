"""Full blocks on busy chains (issue 26): native-coin detection reads blocks with their transactions, and a
request for many of them can pass what a provider answers at once. One request's answer stays near
RPC_MAX_RESPONSE_BYTES, and a provider's "response too large" (geth's -32003) splits the request."""

from __future__ import annotations

from payments.scan import scan_network
from tests.payments.verification.helpers import local, payment_of, units

CALLDATA_BYTES = 8_000  # a busy block's worth of transactions, in one: about 16 KB of hex per full block
FAT_BLOCKS = 12


def fat_blocks(chain, count: int) -> None:
    for _ in range(count):
        chain.wallet.send(to="0x" + "42" * 20, data="0x" + "ab" * CALLDATA_BYTES, gas=400_000)


def test_a_native_payment_among_large_blocks_is_credited_on_a_provider_that_caps_answers(chain, provider, customer):
    """The blocks where the coin moved are read in full, in requests the provider answers."""
    # Given a provider that answers at most about three full blocks at a time, as geth does past its cap
    provider.response_bytes_cap = 3 * 2 * CALLDATA_BYTES + 3_000
    order = customer.order(asset="ETH")
    scan_network(network=local())

    # When the order is paid among a dozen large blocks
    fat_blocks(chain, FAT_BLOCKS // 2)
    chain.wallet.pay_native(order["payment"]["address"], units(order))
    fat_blocks(chain, FAT_BLOCKS // 2)
    scan_network(network=local())
    scan_network(network=local())

    # Then it is credited: the requests the provider refused were split, not given up
    assert provider.too_large > 0
    assert payment_of(order).status == "confirmed"


def test_one_request_for_full_blocks_brings_back_about_the_bound(chain, provider, customer, settings):
    # Given a bound of about four large blocks an answer, and a coin order whose coin moved among many large blocks
    settings.RPC_MAX_RESPONSE_BYTES = 4 * 2 * CALLDATA_BYTES
    order = customer.order(asset="ETH")
    scan_network(network=local())
    fat_blocks(chain, 3 * FAT_BLOCKS)
    chain.wallet.pay_native(order["payment"]["address"], 1)
    provider.full_blocks = provider.largest_answer = 0

    # When a pass reads them in full
    scan_network(network=local())

    # Then after the first request (10 blocks, before their size is known) no answer passes the bound by more
    # than a block; before, 100 blocks came in one answer
    assert provider.full_blocks > 3 * FAT_BLOCKS
    assert provider.largest_answer <= 10 * (2 * CALLDATA_BYTES + 3_000)
    provider.largest_answer = 0
    fat_blocks(chain, 2 * FAT_BLOCKS)
    chain.wallet.pay_native(order["payment"]["address"], 1)
    scan_network(network=local())
    assert provider.largest_answer <= settings.RPC_MAX_RESPONSE_BYTES + 2 * CALLDATA_BYTES + 3_000

"""The providers' own refusal texts (issue 26), read as a range refusal and the span to try next: the texts are
copied from their documentation, client sources and issue threads."""

from __future__ import annotations

import pytest

from payments.log_ranges import range_refused, span_after_refusal
from payments.rpc import RATE_LIMIT_MESSAGE, RESPONSE_TOO_LARGE

REFUSALS = {
    # provider: (message, the span asked for, the span to try next)
    "QuickNode": ("eth_getLogs is limited to a 10,000 range", 50_000, 10_000),
    "QuickNode free": ("eth_getLogs is limited to a 5 block range", 1000, 5),
    "BlockPI": ("eth_getLogs is limited to 1024 block range. Please check the parameter requirements", 2000, 1024),
    "Alchemy": (
        "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on "
        "the response size, or you can request any block range with a cap of 10K logs in the response. Based on "
        "your parameters and the response size limit, this block range should work: [0x10, 0x4f]",
        1000,
        64,
    ),
    "Infura": ("query returned more than 10000 results. Try with this block range [0xBDE5F8, 0xBDE9DF].", 5000, 1000),
    "thirdweb": ("Maximum allowed number of requested blocks is 1000", 2000, 1000),
    "geth --rpc.rangelimit": ("exceed maximum block range 500", 1000, 500),
    "Ankr": ("query exceeds max results 200000, retry with the range 100-199", 1000, 500),
}


@pytest.mark.parametrize("provider", REFUSALS)
def test_each_providers_range_refusal_is_read_and_gives_the_next_span(provider):
    message, asked, expected = REFUSALS[provider]
    assert range_refused(message)
    assert span_after_refusal(asked, message) == expected


@pytest.mark.parametrize(
    "message", ["execution reverted", "header not found", "invalid argument 0: hex string without 0x prefix"]
)
def test_other_errors_are_not_range_refusals(message):
    assert not range_refused(message)


def test_geths_response_too_large_and_rate_limit_texts_are_told_apart():
    assert RESPONSE_TOO_LARGE.search("response too large")
    assert not RESPONSE_TOO_LARGE.search("Too Many Requests")
    assert RATE_LIMIT_MESSAGE.search("Your app has exceeded its compute units per second capacity")
    assert not RATE_LIMIT_MESSAGE.search("response too large")

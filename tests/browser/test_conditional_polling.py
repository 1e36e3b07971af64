"""The order page's script polls conditionally, in a real browser (Chromium): after the page's first full
answer it sends the ETag back in If-None-Match and is answered 304 while nothing changes; a change reaches
the page in place, and the script then asks again with the new ETag."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.browser.conftest import order_placed

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

WAIT_MS = 30_000


def test_the_order_page_polls_with_if_none_match_and_shows_a_change_in_place(open_context, shop, order_payload):
    from payments.models import PaymentRequest
    from provisioning.models import Node

    # Given an order awaiting payment, its page open in a browser that records each poll of the order API
    Node.objects.create(name="polling-node", driver="local", host="127.0.0.1")
    placed = order_placed(shop, order_payload)
    api_path = f"/api/v1/orders/{placed['reference']}/"
    polls: list[tuple[int, str | None, str | None]] = []
    page = open_context("en").new_page()
    page.on(
        "response",
        lambda response: (
            polls.append((response.status, response.request.headers.get("if-none-match"), response.headers.get("etag")))
            if urlsplit(response.url).path == api_path
            else None
        ),
    )
    try:
        page.goto(urlsplit(placed["status_url"]).path)

        # When nothing changes for a few polls (2 s, then 3 s, 4.5 s...; a loaded machine answers later)
        for _ in range(40):
            if len(polls) >= 2:
                break
            page.wait_for_timeout(500)

        # Then the first poll got the full answer and its ETag, and the next ones sent it back and got 304s
        assert polls, "the page did not poll the order API"
        assert polls[0][0] == 200 and polls[0][2], polls
        assert any(status == 304 and sent == polls[0][2] for status, sent, _etag in polls[1:]), polls

        # When the payment is seen arriving (as the scan records it)
        PaymentRequest.objects.filter(order__reference=placed["reference"]).update(
            status="detected", confirmations=1, received_base_units=1
        )

        # Then the page comes back with the new story (less than the quote was seen: the shortfall is named at once,
        # issue 40), and its polls after that ask with the new ETag
        page.locator("#payment-status.status--detected").wait_for(timeout=WAIT_MS)
        assert page.locator("[data-story=detected_short]").is_visible()
        changed = next(etag for status, _sent, etag in polls if status == 200 and etag != polls[0][2])
        for _ in range(40):  # the reloaded page's first poll (2 s), then the next one (3 s)
            if any(sent == changed for _status, sent, _etag in polls):
                break
            page.wait_for_timeout(500)
        assert any(sent == changed for _status, sent, _etag in polls), polls
    finally:
        page.close()

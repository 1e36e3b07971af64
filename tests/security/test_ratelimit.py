"""Rate limits answer 429 with Retry-After once an IP has used up its budget."""

from __future__ import annotations

import pytest
from django.core.cache import cache


@pytest.fixture
def limits_on(settings):
    settings.RATELIMIT_ENABLE = True
    settings.RATELIMIT_TOKEN_FAILURES = 3
    cache.clear()
    yield settings
    cache.clear()


@pytest.mark.django_db
def test_token_guesses_from_one_ip_are_refused_with_429_after_the_limit(client, limits_on):
    # Given three wrong-token reads from one IP
    for _ in range(3):
        assert client.get("/api/v1/orders/NOPE/", HTTP_X_ORDER_TOKEN="x").status_code == 404
    # When the IP tries again, then it gets 429 with a JSON detail and Retry-After
    response = client.get("/api/v1/orders/NOPE/", HTTP_X_ORDER_TOKEN="x")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "detail" in response.json()
    # And the order pages are refused too, with an HTML page
    page = client.get("/o/NOPE/x/")
    assert page.status_code == 429 and b"Too many requests" in page.content


@pytest.mark.django_db
def test_with_limits_off_wrong_tokens_stay_plain_404(client, limits_on):
    limits_on.RATELIMIT_ENABLE = False
    for _ in range(5):
        assert client.get("/api/v1/orders/NOPE/", HTTP_X_ORDER_TOKEN="x").status_code == 404

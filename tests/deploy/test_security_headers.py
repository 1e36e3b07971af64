"""The Content-Security-Policy (without `unsafe-inline`) and the other security headers on the customer's
pages, the order's page, the admin and the API."""

from __future__ import annotations

import pytest

from core.csp import HEADER

EXPECTED = {
    "default-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "style-src": ["'self'"],
    "script-src": ["'self'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
    "base-uri": ["'none'"],
}


def directives(header: str) -> dict[str, list[str]]:
    parsed = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            parsed[words[0]] = words[1:]
    return parsed


def order_path(placed_order: dict) -> str:
    return "/" + placed_order["status_url"].split("://", 1)[-1].split("/", 1)[1]


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["/", "/order/", "order page", "/admin/login/", "/api/v1/catalog/", "/healthz"])
def test_every_response_carries_a_csp_without_unsafe_inline(client, placed_order, where):
    path = order_path(placed_order) if where == "order page" else where

    response = client.get(path)

    assert response.status_code == 200, path
    policy = response.headers[HEADER]
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    parsed = directives(policy)
    for directive, sources in EXPECTED.items():
        assert parsed.get(directive) == sources, f"{path}: {directive} is {parsed.get(directive)}"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert response.headers["X-Frame-Options"] == "DENY"


@pytest.mark.django_db
def test_the_order_page_keeps_its_self_refresh_for_browsers_without_javascript(client, placed_order):
    # Given an order awaiting payment / When its page is rendered
    html = client.get(order_path(placed_order)).content.decode()

    # Then the meta refresh is there for browsers without JavaScript only; the script polls instead
    assert '<noscript><meta http-equiv="refresh"' in html
    assert html.count('http-equiv="refresh"') == 1
    assert '/js/order-status.js" defer' in html

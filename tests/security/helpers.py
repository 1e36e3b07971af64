"""Reading what the security tests need from an order's API body."""

from __future__ import annotations


def page_path(placed: dict) -> str:
    """The order page's path (`status_url` without scheme and host)."""
    return "/" + placed["status_url"].split("://", 1)[-1].split("/", 1)[1]

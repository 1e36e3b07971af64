"""The API's error answers: besides a `detail` or the messages of each bad field, every one carries a stable `code`
and the request's `request_id` (core/request_id.py). Tests that compare the messages compare them without those."""

from __future__ import annotations

from typing import Any

MARKS = ("code", "request_id")


def error_fields(response: Any, code: str | None = None) -> dict[str, Any]:
    """The error body of `response` without its marks, once they are checked: a `code` (the one given, if any) and
    the `request_id` the X-Request-ID header carries."""
    body = response.json()
    assert isinstance(body.get("code"), str) and body["code"], body
    assert body.get("request_id") == response["X-Request-ID"], body
    if code is not None:
        assert body["code"] == code, body
    return {name: value for name, value in body.items() if name not in MARKS}

"""Fuzz suite helpers: counting the cases tried, and what every refusal must tell the client."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from tests.api_answers import MARKS

# How many cases each fuzz test sent, by operation or form, and the status codes they got;
# printed at the end of the run (conftest.py) for the figures of docs/reliability-and-security.md.
CASES_TRIED: Counter[str] = Counter()
STATUSES: dict[str, Counter[int]] = defaultdict(Counter)


def tally(label: str, status: int) -> None:
    CASES_TRIED[label] += 1
    STATUSES[label][status] += 1


def stored_state() -> dict[str, Any]:
    """What placing an order writes: the row counts, and where each address cursor stands (a refused
    order that moved a cursor would burn a deposit address without adding a row)."""
    from payments.models import AddressCursor
    from tests.shop.helpers import stored_counts

    cursors = dict(AddressCursor.objects.values_list("key_fingerprint", "next_index"))
    return {**stored_counts(), "address cursors": cursors}


def what_is_wrong_is_said(body: Any, fields: Iterable[str]) -> str | None:
    """None when a 4xx body names the problem: its `code` and `request_id`, and a non-empty `detail` or a non-empty
    message list per known field.

    Otherwise a sentence saying what is missing, for the assertion message.
    """
    if not isinstance(body, dict) or not body:
        return f"the body is not a JSON object with a message: {body!r:.200}"
    for mark in MARKS:
        if not isinstance(body.get(mark), str) or not body[mark]:
            return f"no `{mark}`: {body!r:.200}"
    body = {name: value for name, value in body.items() if name not in MARKS}
    if isinstance(body.get("detail"), str):
        return None if body["detail"].strip() else "`detail` is empty"
    known = set(fields) | {"non_field_errors"}
    for field, messages in body.items():
        if field not in known:
            return f"the error names {field!r}, which is not a field of this request"
        if not isinstance(messages, list) or not messages:
            return f"no message list for {field!r}: {messages!r:.200}"
        if not all(isinstance(message, str) and message.strip() for message in messages):
            return f"an empty or non-text message for {field!r}: {messages!r:.200}"
    return None

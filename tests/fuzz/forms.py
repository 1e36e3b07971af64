"""Posting raw form bodies (any text, lone surrogates and invalid UTF-8 included) and reading the answer."""

from __future__ import annotations

import re
from urllib.parse import quote_from_bytes

FORM = "application/x-www-form-urlencoded"
ERROR_LIST = re.compile(r'<ul class="field__errors" id="id_(?P<field>\w+)_error">(?P<messages>.*?)</ul>', re.S)


def raw(value: str) -> bytes:
    """The bytes a careless client sends: lone surrogates pass through as (invalid) UTF-8."""
    return value.encode("utf-8", "surrogatepass")


def as_received(value: str) -> str:
    """What Django reads back from those bytes (invalid sequences become U+FFFD)."""
    return raw(value).decode("utf-8", "replace")


def form_body(data: dict[str, str | None]) -> bytes:
    """An urlencoded body; a None value leaves the field out."""
    return b"&".join(
        quote_from_bytes(raw(name)).encode() + b"=" + quote_from_bytes(raw(value)).encode()
        for name, value in data.items()
        if value is not None
    )


def post_form(client, path: str, data: dict[str, str | None]):
    return client.post(path, form_body(data), content_type=FORM)


def field_errors(response) -> dict[str, str]:
    """The error list shown next to each field, by field name."""
    return {match["field"]: match["messages"] for match in ERROR_LIST.finditer(response.content.decode())}

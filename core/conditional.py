"""Conditional GET for pages and API bodies that are polled: an ETag on the answer, and 304 with no body to a
client whose `If-None-Match` holds it. The ETag is computed by the caller without rendering the body."""

from __future__ import annotations

from typing import TypeVar

from django.http import HttpRequest, HttpResponseBase, HttpResponseNotModified
from django.utils.http import parse_etags

# The browser keeps the answer but asks again every time (no-cache), and never shares it (private: it carries
# the order's secret token).
CACHE_CONTROL = "private, no-cache"
Response = TypeVar("Response", bound=HttpResponseBase)


def _opaque(etag: str) -> str:
    return etag.removeprefix("W/")


def etag_matches(request: HttpRequest, etag: str) -> bool:
    """If-None-Match's weak comparison (RFC 9110 13.1.2): `W/"x"` matches `"x"`, and `*` matches anything."""
    header = request.headers.get("If-None-Match", "")
    if not header:
        return False
    offered = parse_etags(header[:1000])  # a client's header is bounded before it is parsed
    return "*" in offered or _opaque(etag) in {_opaque(tag) for tag in offered}


def validator_set(response: Response, etag: str) -> Response:
    response.headers["ETag"] = etag
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


def not_modified(etag: str) -> HttpResponseNotModified:
    return validator_set(HttpResponseNotModified(), etag)

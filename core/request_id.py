"""Every request has an id: in the `X-Request-ID` header of every answer, in every log line written while it runs,
and, with a stable `code`, in the body of every JSON error. A customer who quotes it lets staff find the lines.

The id is the client's own `X-Request-ID` when it sent a sane one (a proxy's or a script's, so that both sides
log the same id); anything else (too long, other characters) is replaced by a new one, never echoed.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from core.log_context import log_context

HEADER = "X-Request-ID"
SANE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{7,127}")  # a UUID, a ULID, a proxy's hex id...

# The `code` of an error answer that set none itself (core/api_errors.py names DRF's; a refusal names its own).
CODE_OF_STATUS = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    410: "gone",
    412: "precondition_failed",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "server_error",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}


def request_id_of(request: HttpRequest) -> str:
    """The client's id when it is sane, else a new one."""
    sent = request.headers.get(HEADER, "")
    return sent if SANE.fullmatch(sent) else uuid.uuid4().hex


def code_of_status(status: int) -> str:
    return CODE_OF_STATUS.get(status, "client_error" if status < 500 else "server_error")


def error_body_marked(response: HttpResponseBase, request_id: str) -> None:
    """A JSON error answer's object gains `request_id`, and `code` when it has none."""
    if response.status_code < 400 or response.streaming or not isinstance(response, HttpResponse):
        return
    if not response.get("Content-Type", "").startswith("application/json"):
        return
    try:
        body = json.loads(response.content)
    except ValueError:
        return
    if not isinstance(body, dict):
        return
    body.setdefault("code", code_of_status(response.status_code))
    body["request_id"] = request_id
    response.content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    if response.has_header("Content-Length"):  # set by CommonMiddleware, inside: the body grew
        response["Content-Length"] = str(len(response.content))


class RequestIdMiddleware:
    """First of the middleware: the id is known to every other one, to the views and to their log lines."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        request_id = request_id_of(request)
        request.request_id = request_id  # type: ignore[attr-defined]  # read by views that log or answer it
        with log_context(request_id=request_id):
            response = self.get_response(request)
        error_body_marked(response, request_id)
        response[HEADER] = request_id
        return response

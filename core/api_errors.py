"""The error answers of the API, in one place: how the OpenAPI schema documents them, so that clients (and the
fuzz suite) can rely on their shape (a `detail` sentence, or one list of messages per bad field; always a `code`
and a `request_id`), and how a view makes them from the exceptions its services raise (`ApiView`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, TypeAlias

from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import APIView, exception_handler

from core.input_errors import CodedRefusal, OrderInputError
from core.request_id import code_of_status

# Every error body carries a stable `code` ("invalid", "not_found", "price_changed"...: the one a script branches
# on) and the request's `request_id` (also its X-Request-ID header; core/request_id.py).
_MARKS = {
    "code": {"type": "string", "minLength": 1},
    "request_id": {"type": "string", "minLength": 1},
}
DETAIL_SCHEMA = {
    "type": "object",
    "properties": {"detail": {"type": "string", "minLength": 1}, **_MARKS},
    "required": ["detail", "code", "request_id"],
}
# DRF's validation errors: {"field": ["message", ...], ...} besides the two marks; a body that is not JSON at
# all gets a `detail`.
FIELD_ERRORS_SCHEMA = {
    "type": "object",
    "properties": _MARKS,
    "required": ["code", "request_id"],
    "minProperties": 3,
    "additionalProperties": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
}


def _detail(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=DETAIL_SCHEMA, description=description)


BAD_INPUT = OpenApiResponse(
    response={"oneOf": [DETAIL_SCHEMA, FIELD_ERRORS_SCHEMA]},
    description="Bad input: a list of messages per bad field, or a `detail` when the body cannot be read.",
)
NOT_FOUND = _detail("No such order, or a wrong or missing token (the two look the same).")
NOT_ALLOWED = _detail("Not signed in, or the account lacks the role.")
UNSUPPORTED_MEDIA_TYPE = _detail("The body is not JSON, form or multipart data.")
TOO_LARGE = _detail("The body is over the size limit, or has too many fields.")
RATE_LIMITED = _detail("Too many requests from this address; the Retry-After header says when to come back.")
CONFLICT = _detail("The order cannot move to this step now; the detail says why.")
UNAVAILABLE = _detail("A server this answer needs (a network's RPC) did not answer; try again in a minute.")

# A status code, or a status code and a media type (`(200, "text/csv")`), as extend_schema's `responses` takes it.
ResponseKey: TypeAlias = int | tuple[int, str]

# The standard answers, each set documented once. A view that reads a body can meet all of BODY_READ (DRF's
# 400, the upload limits' 413, the parsers' 415); one that core.ratelimit counts also 429; one for staff 401/403.
BODY_READ: Mapping[ResponseKey, object] = {400: BAD_INPUT, 413: TOO_LARGE, 415: UNSUPPORTED_MEDIA_TYPE}
LIMITED: Mapping[ResponseKey, object] = {429: RATE_LIMITED}
LIMITED_BODY_READ: Mapping[ResponseKey, object] = {**BODY_READ, **LIMITED}
STAFF_ONLY: Mapping[ResponseKey, object] = {401: NOT_ALLOWED, 403: NOT_ALLOWED}


def _status_of(key: ResponseKey) -> int:
    return key[0] if isinstance(key, tuple) else key


def documented(own: Mapping[ResponseKey, object], *standard: Mapping[ResponseKey, object]) -> dict[ResponseKey, object]:
    """A view's `responses` for extend_schema: its own answers and the standard sets it can meet, in status order
    (a code of its own wins over a standard one)."""
    merged: dict[ResponseKey, object] = {}
    for answers in (*standard, own):
        merged.update(answers)
    return dict(sorted(merged.items(), key=lambda item: _status_of(item[0])))


class Refused(exceptions.APIException):
    """A service's refusal answered 409 with its words as the `detail` (and `code`: "conflict" or its own)."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def error_code(exc: exceptions.APIException, status_code: int) -> str:
    """The stable `code` of an error answer: "invalid" for bad fields, else DRF's own code for the exception
    ("not_found", "parse_error", "throttled"...), else one for the status."""
    if isinstance(exc, exceptions.ValidationError):
        return "invalid"
    codes = exc.get_codes()
    return codes if isinstance(codes, str) else code_of_status(status_code)


def api_exception_handler(exc: Exception, context: dict[str, object]) -> Response | None:
    """REST_FRAMEWORK's EXCEPTION_HANDLER: DRF's answer, with the `code` of the exception. core/request_id.py adds
    the `request_id` to every JSON error, and a `code` to those that come from elsewhere (a 429, a 500)."""
    response = exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and isinstance(exc, exceptions.APIException):
        response.data.setdefault("code", error_code(exc, response.status_code))
    return response


def answerable(
    exc: Exception,
    *,
    refusals: tuple[type[Exception], ...] = (),
    field_errors: Mapping[type[Exception], str] | None = None,
) -> Exception:
    """The DRF exception an expected failure is answered with, or `exc` itself when it is not one: bad input of one
    field (an OrderInputError, or an exception `field_errors` names a field for) is a 400 `{field: [message]}`, a
    refusal a 409 `{"detail": ...}` (a CodedRefusal with its `code` and facts, whatever view meets it). Field errors
    are looked at first: a field error may be a kind of refusal."""
    if isinstance(exc, OrderInputError):
        return exceptions.ValidationError({exc.field: [exc.message]})
    if isinstance(exc, CodedRefusal):
        return Refused({"detail": str(exc), "code": exc.code, **exc.facts})
    for kind, field in (field_errors or {}).items():
        if isinstance(exc, kind):
            return exceptions.ValidationError({field: [str(exc)]})
    if isinstance(exc, refusals):
        return Refused(str(exc))
    return exc


# An API view whose expected failures are answered in one place (`answerable`), so that its handlers hold no
# `except ...: return Response(..., status=400)`: an OrderInputError is always a 400 on its field; the view names
# the refusals of the services it calls (409) and any other exception that is bad input of one field (400).
# (Comments, not a docstring: drf-spectacular would show a base class's docstring as every operation's description.)
class ApiView(APIView):
    refusals: ClassVar[tuple[type[Exception], ...]] = ()
    field_errors: ClassVar[Mapping[type[Exception], str]] = {}

    def handle_exception(self, exc: Exception) -> Response:
        return super().handle_exception(answerable(exc, refusals=self.refusals, field_errors=self.field_errors))

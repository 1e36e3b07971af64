"""The error answers of the API as the OpenAPI schema documents them, so that clients (and the fuzz suite)
can rely on their shape: a `detail` sentence, or one list of messages per bad field.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse

DETAIL_SCHEMA = {
    "type": "object",
    "properties": {"detail": {"type": "string", "minLength": 1}},
    "required": ["detail"],
}
# DRF's validation errors: {"field": ["message", ...], ...}; a body that is not JSON at all gets a `detail`.
FIELD_ERRORS_SCHEMA = {
    "type": "object",
    "minProperties": 1,
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

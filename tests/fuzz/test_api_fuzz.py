"""The REST API fuzzed from its own OpenAPI schema (schemathesis, in process, against the test database).

For every operation, cases that follow the schema and cases that break it: never a 500, every answer as the
schema documents it, every refusal saying what is wrong, and a refused order stores nothing.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from config.wsgi import application
from tests.fuzz.helpers import stored_state, tally, what_is_wrong_is_said

EXAMPLES_PER_OPERATION = 100
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 20261203,  # one fixed seed: CI replays the very same cases
        "generation": {"mode": "all", "max-examples": EXAMPLES_PER_OPERATION, "database": "none"},
        # The schema declares no links between operations; the real order is aimed at below instead.
        "phases": {"stateful": {"enabled": False}},
        "checks": {
            # Wrong or missing X-Order-Token is a 404 by contract, so that nothing tells an order exists.
            "missing_required_header": {"expected-statuses": ["400", "401", "403", "404"]},
            # Schema-valid is not enough to be accepted: the preparation, network and asset must be on offer,
            # the lots free, the SSH key a real key, the order reference an existing one. A 400 or 404
            # for those is the documented answer (and is itself checked to name the field).
            "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "404"]},
        },
        "operations": [
            {
                # The advisor stores nothing and keeps DRF's lenient reading of JSON booleans and integers
                # (0/1 and "true" for true, "7" for 7), because the same serializer reads its query string.
                "include-path": "/api/v1/advisor/",
                "checks": {"negative_data_rejection": {"enabled": False}},
            },
            {
                # Generated credentials are never a real operator's (the token is tried on the real order below).
                "include-path": "/api/v1/orders/{reference}/prepare/",
                "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "401", "403", "404"]}},
            },
            {
                # Generated credentials are never an operator's (a real operator's recheck: test_node_recheck.py;
                # a real operator's move: test_node_move.py).
                "include-path-regex": "^/api/v1/nodes/",
                "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "401", "403", "404"]}},
            },
            {
                # Generated credentials are never a payment reviewer's or a treasurer's (tested with real ones in
                # tests/payments/verification/test_refunds.py and test_treasury.py).
                "include-path-regex": "^/api/v1/(refunds|treasury)/",
                "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "401", "403", "404"]}},
            },
        ],
    }
)
schema = schemathesis.openapi.from_wsgi("/api/schema/", application, config=CONFIG)


def request_fields(case) -> set[str]:
    """The names a 400 may point at: the operation's parameters and the properties of its body."""
    raw = schema.raw_schema
    # The coverage phase also sends methods the path does not have (TRACE, PUT...): those only get a `detail`.
    operation = raw["paths"][case.operation.path].get(case.method.lower(), {})
    names = {parameter["name"] for parameter in operation.get("parameters", [])}
    for content in operation.get("requestBody", {}).get("content", {}).values():
        body = content["schema"]
        if "$ref" in body:
            body = raw["components"]["schemas"][body["$ref"].rsplit("/", 1)[-1]]
        names |= set(body.get("properties", {}))
    return names


def assert_says_what_is_wrong(case, response) -> None:
    if 400 <= response.status_code < 500:
        problem = what_is_wrong_is_said(response.json(), request_fields(case))
        assert problem is None, f"{case.method} {case.formatted_path} -> {response.status_code}: {problem}"


def aimed_at(case, order: dict, operator_token: str):
    """The same case sent to the real order with its token (and an operator's): body and query as generated."""
    headers = {**(case.headers or {}), "X-Order-Token": order["access_token"]}
    if "prepare" in case.operation.path:
        headers = {"Authorization": f"Token {operator_token}"}
    return case.operation.Case(
        path_parameters={**case.path_parameters, "reference": order["reference"]},
        headers=headers,
        query=case.query,
        body=case.body,
        media_type=case.media_type,
    )


@pytest.mark.django_db
@schema.parametrize()
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_no_operation_answers_500_or_off_schema_and_every_refusal_says_why(
    case, placed_order, operator_token, wsgi_inside_the_test_transaction
):
    # Given a shop with free lots and one placed order
    label = f"{case.operation.method.upper()} {case.operation.path}"
    before = stored_state()

    # When the generated case is sent
    response = case.call_and_validate()
    tally(label, response.status_code)

    # Then (besides schemathesis' checks: no 5xx, status, content type and body as documented)
    # a refusal names what is wrong
    assert_says_what_is_wrong(case, response)
    # And a refused order stores nothing, reserves nothing and uses up no deposit address
    if label == "POST /api/v1/orders/" and response.status_code >= 400:
        assert stored_state() == before

    # And the same request aimed at the real order with its token is answered as documented too
    if "reference" in (case.path_parameters or {}):
        aimed = aimed_at(case, placed_order, operator_token)
        response = aimed.call_and_validate()
        tally(f"{label} (the real order)", response.status_code)
        assert_says_what_is_wrong(aimed, response)

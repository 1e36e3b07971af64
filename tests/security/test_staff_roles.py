"""Each staff endpoint against each role: operators prepare, reviewers settle payments, nobody else does either."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from orders.models import Order
from payments.models import PaymentRequest

ROLES = ("anonymous", "customer", "operator", "reviewer", "superuser")
LOGIN = "login"  # a redirect to the admin's login page
# (what, method, url pattern, expected per role). The order is unpaid: an allowed prepare is a 409 or a
# redirect with the reason, never a started preparation.
MATRIX = [
    ("operator console", "get", "/ops/", [LOGIN, LOGIN, 200, 403, 200]),
    ("console: prepare", "post", "/ops/orders/{ref}/prepare/", [LOGIN, LOGIN, 302, 403, 302]),
    ("console: run report", "get", "/ops/runs/999999/", [LOGIN, LOGIN, 404, 403, 404]),
    ("API: prepare", "post", "/api/v1/orders/{ref}/prepare/", [403, 403, 409, 403, 409]),
    ("console: recheck", "post", "/ops/nodes/no-such-node/recheck/", [LOGIN, LOGIN, 404, 403, 404]),
    ("API: recheck", "post", "/api/v1/nodes/no-such-node/recheck/", [403, 403, 404, 403, 404]),
    ("admin: node checks", "get", "/admin/provisioning/nodecheck/", [LOGIN, LOGIN, 200, 403, 200]),
    ("admin: payments", "get", "/admin/payments/paymentrequest/", [LOGIN, LOGIN, 403, 200, 200]),
    ("admin: payment page", "get", "/admin/payments/paymentrequest/{payment}/change/", [LOGIN, LOGIN, 403, 200, 200]),
    ("admin: accept payment", "post", "/admin/payments/paymentrequest/", [LOGIN, LOGIN, 403, 200, 200]),
    ("admin: nodes", "get", "/admin/fleet/node/", [LOGIN, LOGIN, 200, 403, 200]),
    ("admin: add node", "get", "/admin/fleet/node/add/", [LOGIN, LOGIN, 200, 403, 200]),
    ("admin: orders", "get", "/admin/orders/order/", [LOGIN, LOGIN, 200, 200, 200]),
]
CASES = [
    pytest.param(method, url, role, expected[index], id=f"{what} as {role}")
    for what, method, url, expected in MATRIX
    for index, role in enumerate(ROLES)
]


def client_as(role: str, placed: dict) -> Client:
    if role == "customer":  # holds the order's secret token, nothing else
        return Client(headers={"X-Order-Token": placed["access_token"]})
    client = Client()
    if role in ("operator", "reviewer"):
        call_command("add_staff", role, "--role", role, stdout=io.StringIO())
        client.force_login(get_user_model().objects.get(username=role))
    elif role == "superuser":
        client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "a-long-pass-42"))
    return client


@pytest.mark.parametrize(("method", "url", "role", "expected"), CASES)
def test_each_staff_endpoint_answers_each_role_as_its_permissions_say(placed, method, url, role, expected):
    payment = PaymentRequest.objects.get(order__reference=placed["reference"])
    path = url.format(ref=placed["reference"], payment=payment.pk)
    accept = {"action": "accept", "_selected_action": [payment.pk]}
    body = accept if method == "post" and path.endswith("paymentrequest/") else {}

    response = getattr(client_as(role, placed), method)(path, body)

    if expected == LOGIN:
        assert response.status_code == 302 and "/login/" in response["Location"], response
    else:
        assert response.status_code == expected, (response.status_code, response.content[:300])
    # Whatever the role, nothing moved: the payment is not accepted and no preparation started
    assert Order.objects.get(reference=placed["reference"]).status == "awaiting_payment"
    assert PaymentRequest.objects.get(pk=payment.pk).reviewed_at is None

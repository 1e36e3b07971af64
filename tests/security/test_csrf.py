"""Every form of the site refuses a post without its CSRF token, and accepts it with the token."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from tests.security.helpers import page_path

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def form_token(client: Client, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200, path
    return TOKEN.search(page.content.decode()).group(1)


@pytest.mark.parametrize("path", ["/order/", "/order/contact/", "/order/payment/", "/order/review/"])
def test_each_wizard_step_refuses_a_post_without_the_csrf_token(path, placed):
    client = Client(enforce_csrf_checks=True)
    assert client.post(path, {"lots": 1}).status_code == 403


def test_the_wizards_first_step_accepts_a_post_with_the_token(placed):
    client = Client(enforce_csrf_checks=True)
    token = form_token(client, "/order/")

    response = client.post(
        "/order/",
        {"csrfmiddlewaretoken": token, "lots": 1, "duration_days": 7, "preparation": "pytorch-blackwell"},
    )

    assert response.status_code in (200, 302)  # the next step, or the form again with its messages


def test_i_have_paid_on_the_order_page_needs_the_csrf_token(placed):
    client = Client(enforce_csrf_checks=True)
    path = page_path(placed)

    refused = client.post(path + "paid/")
    accepted = client.post(path + "paid/", {"csrfmiddlewaretoken": form_token(client, path)})

    assert refused.status_code == 403
    assert accepted.status_code == 302


def test_the_operators_prepare_button_and_the_admin_login_need_the_csrf_token(placed):
    call_command("add_staff", "olga", "--role", "operator", stdout=io.StringIO())
    operator = Client(enforce_csrf_checks=True)
    operator.force_login(get_user_model().objects.get(username="olga"))
    visitor = Client(enforce_csrf_checks=True)

    prepare = operator.post(f"/ops/orders/{placed['reference']}/prepare/")
    login = visitor.post("/admin/login/", {"username": "olga", "password": "x"})
    with_token = operator.post(
        f"/ops/orders/{placed['reference']}/prepare/", {"csrfmiddlewaretoken": form_token(operator, "/ops/")}
    )

    assert (prepare.status_code, login.status_code) == (403, 403)
    assert with_token.status_code == 302  # back to the console, which says the order is not paid

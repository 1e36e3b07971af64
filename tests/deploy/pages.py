"""The HTML pages a deployment serves, walked with Django's test client, and what CSP forbids in them."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.urls import NoReverseMatch, reverse

SCRIPT_TAG = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.I | re.S)
STYLE_ATTRIBUTE = re.compile(r"<[a-z][^>]*\sstyle\s*=", re.I)
STYLE_ELEMENT = re.compile(r"<style\b", re.I)
EVENT_HANDLER = re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.I)
JAVASCRIPT_URL = re.compile(r"""(?:href|src|action)\s*=\s*["']?\s*javascript:""", re.I)


@dataclass(frozen=True)
class Page:
    name: str
    html: str


def inline_code(html: str) -> list[str]:
    """What a CSP without `unsafe-inline` would block: inline scripts, styles, handlers, javascript: URLs."""
    found = []
    for attributes, body in SCRIPT_TAG.findall(html):
        if "application/json" in attributes.lower():
            continue  # a data block, never executed
        if not re.search(r"\ssrc\s*=", " " + attributes) or body.strip():
            found.append(f"inline <script{attributes}>{body.strip()[:80]}")
    found += [f"style attribute: {m.group(0)[:100]}" for m in STYLE_ATTRIBUTE.finditer(html)]
    found += [f"<style> element: {m.group(0)}" for m in STYLE_ELEMENT.finditer(html)]
    found += [f"event handler: {m.group(0)[:100]}" for m in EVENT_HANDLER.finditer(html)]
    found += [f"javascript: URL: {m.group(0)}" for m in JAVASCRIPT_URL.finditer(html)]
    return found


def get(client: Client, name: str, path: str, status: int = 200) -> Page:
    response = client.get(path)
    assert response.status_code == status, f"{name}: GET {path} answered {response.status_code}"
    assert response["Content-Type"].startswith("text/html"), f"{name}: {response['Content-Type']}"
    return Page(name, response.content.decode())


def customer_pages(client: Client, *, ssh_public_key: str) -> list[Page]:
    """Home, each wizard step with its answers, and the advisor where the project has one."""
    pages = [get(client, "home", "/"), get(client, "configure", "/order/")]
    post = client.post("/order/", {"lots": 1, "duration_days": 7, "preparation": "pytorch-blackwell", "continue": "1"})
    assert post.status_code == 302, post.content
    pages.append(get(client, "contact", "/order/contact/"))
    post = client.post(
        "/order/contact/",
        {
            "first_name": "Ada",
            "last_name": "Lovelace",
            "email": "ada@example.org",
            "ssh_public_key": ssh_public_key,
            "terms": "on",
        },
    )
    assert post.status_code == 302, post.content
    pages.append(get(client, "payment", "/order/payment/"))
    assert client.post("/order/payment/", {"payment_option": "local:ETH"}).status_code == 302
    pages.append(get(client, "review", "/order/review/"))
    with contextlib.suppress(NoReverseMatch):  # the fit advisor, where the project has one
        pages.append(get(client, "advisor", reverse("shop:advisor")))
    with contextlib.suppress(NoReverseMatch):  # "Find my order", the terms and the privacy notice
        pages.append(get(client, "find my order", reverse("shop:order_find")))
        refused = client.post(reverse("shop:order_find"), {"email": "not an email"})
        assert refused.status_code == 400, refused.content
        pages.append(Page("find my order, refused", refused.content.decode()))
        pages.append(get(client, "find my order, sent", reverse("shop:order_find_sent")))
        pages.append(get(client, "terms", reverse("shop:terms")))
        pages.append(get(client, "privacy", reverse("shop:privacy")))
    pages.append(get(client, "not found", "/no-such-page/", status=404))
    return pages


def order_pages(client: Client, *, status_url: str, reference: str) -> list[Page]:
    """The order's page while it awaits payment, and once it is paid; its receipt before and after."""
    from orders.models import Order
    from orders.payment_outcome import OrderPaymentOutcome, order_payment_outcome

    path = "/" + status_url.split("://", 1)[-1].split("/", 1)[1]
    pages = [get(client, "order awaiting payment", path), get(client, "no receipt yet", path + "receipt/")]
    order = Order.objects.get(reference=reference)
    with transaction.atomic():
        order_payment_outcome(order_id=order.pk, outcome=OrderPaymentOutcome.PAID, reason="paid in the test")
    pages.append(get(client, "order paid", path))
    pages.append(get(client, "receipt", path + "receipt/"))
    return pages


def staff_pages(client: Client, *, reference: str) -> list[Page]:
    """The operator console and Django's admin: login, index, a list and a change form."""
    from django.contrib.auth import get_user_model

    from orders.models import Order

    anonymous = Client()
    pages = [get(anonymous, "admin login", "/admin/login/")]
    call_command("add_staff", "olga", "--role", "operator", "--password", "a-long-operator-password")
    operator = Client()
    operator.force_login(get_user_model().objects.get(username="olga"))
    pages.append(get(operator, "operator console", "/ops/"))

    admin = get_user_model().objects.create_superuser("root", "root@example.org", "a-long-admin-password")
    client.force_login(admin)
    order = Order.objects.get(reference=reference)
    pages += [
        get(client, "admin index", "/admin/"),
        get(client, "admin orders", "/admin/orders/order/"),
        get(client, "admin order", f"/admin/orders/order/{order.pk}/change/"),
        get(client, "admin networks", "/admin/payments/network/"),
        get(client, "admin add node", "/admin/fleet/node/add/"),
    ]
    return pages

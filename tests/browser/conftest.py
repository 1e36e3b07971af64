"""One Chromium per module (Debian's, driven by Playwright) and browser contexts on pytest-django's live server;
the shop on the test database: the `local` network on the session's anvil with test USDC, a GPU node of the
`local` driver (CPU preflight, accounts in the sandboxed user database of tests/sshd.py) and an operator."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
from django.core.management import call_command

from tests.browser.checks import (
    CHROMIUM,
    CHROMIUM_ARGS,
    VIEWPORT,
    PageChecks,
    axe_missing,
    chromium_missing,
)
from tests.placing import order_posted
from tests.sshd import sandbox_sshd  # noqa: F401 - the session fixture

OPERATOR_PASSWORD = "a-long-operator-password"
# Each language's customer, in a time zone of their own: dates on the pages are theirs.
TIME_ZONES = {"en": "America/New_York", "es": "Europe/Madrid", "fr": "Europe/Paris"}


@pytest.fixture(scope="module")
def browser():
    chromium_missing()
    axe_missing()
    from django.db import connections
    from playwright.sync_api import sync_playwright

    # Playwright's sync API leaves its asyncio loop marked as running in this thread between its calls. Django
    # then refuses ORM calls ("async context": allowed here, they never run concurrently with the loop) and
    # keeps database connections in a store of that context instead of the thread's: hand it the thread's own,
    # which hold the test database's state (the catalog serialized for rollback).
    thread_connections = {alias: connections[alias] for alias in connections}
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        for alias, connection in thread_connections.items():
            connections[alias] = connection
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def page_checks(tmp_path_factory):
    """Collects every page's rendered HTML for the module's Nu HTML checker run."""
    return PageChecks(html_dir=tmp_path_factory.mktemp("rendered-pages"))


@pytest.fixture
def open_context(browser, live_server):
    """Opens browser contexts on the live server (closed after the test): a customer's, with the language's
    locale, Accept-Language and a time zone of its own, or a plain one. bypass_csp lets axe-core's injected
    script run under the shop's Content-Security-Policy."""
    contexts = []

    def open_(language: str | None = None):
        options = {"base_url": live_server.url, "viewport": VIEWPORT, "bypass_csp": True}
        if language:
            options |= {
                "locale": language,
                "timezone_id": TIME_ZONES[language],
                "extra_http_headers": {"Accept-Language": f"{language},en;q=0.5"},
            }
        context = browser.new_context(**options)
        context.set_default_timeout(30_000)
        contexts.append(context)
        return context

    yield open_
    for context in contexts:
        context.close()


@dataclass
class Shop:
    anvil: object
    node: object
    operator: str
    operator_password: str
    customer_public_key: str


@pytest.fixture
def no_other_networks(monkeypatch):
    """Only the `local` network (the session's anvil) is offered at checkout, whatever the shell sets."""
    for name in list(os.environ):
        if name.startswith("CHAIN_RPC_URLS_") and name != "CHAIN_RPC_URLS_LOCAL":
            monkeypatch.delenv(name)


@pytest.fixture
def shop(live_server, anvil, no_other_networks, sandbox_sshd, tmp_path):  # noqa: F811
    from payments.devnet import devnet_setup
    from payments.models import Network
    from payments.networks import rpc_client
    from provisioning.models import Node

    devnet_setup(client=rpc_client(Network.objects.get(slug="local")))
    node = Node.objects.create(
        name="browser-node",
        driver="local",
        host="127.0.0.1",
        port=sandbox_sshd.port,
        host_key=sandbox_sshd.host_key,
        python=sys.executable,
        preflight_device="cpu",
        gpu_count=2,
        accounts_root=str(sandbox_sshd.sandbox),
    )
    call_command("add_staff", "olga", "--role", "operator", "--password", OPERATOR_PASSWORD)
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, capture_output=True)
    return Shop(
        anvil=anvil,
        node=node,
        operator="olga",
        operator_password=OPERATOR_PASSWORD,
        customer_public_key=key.with_suffix(".pub").read_text().strip(),
    )


def rental_started(reference: str) -> None:
    """A paid order handed over as a preparation would (the preflight itself is the journey's to run): its
    rental clock starts now."""
    import datetime as dt

    from django.db import transaction
    from django.utils import timezone

    from orders.models import Order
    from orders.orders import order_transition

    with transaction.atomic():
        order = Order.objects.select_for_update().get(reference=reference)
        order_transition(order=order, to="preparing", actor="operator", reason="prepare")
        now = timezone.now()
        order.active_since, order.ends_at = now, now + dt.timedelta(days=order.duration_days)
        order.save(update_fields=["active_since", "ends_at"])
        order_transition(order=order, to="active", actor="system", reason="every node passed its preflight")


def order_placed(
    shop: Shop, order_payload: dict, *, asset: str = "USDC", language: str | None = None, **fields
) -> dict:
    """An order placed through the API as the customer's browser would, with the customer's own SSH key, paid in
    `asset`, in `language` (else the API's default); `fields` override the payload's. The 201 body: it carries the
    order's private link."""
    from django.test import Client

    body = {**order_payload, "asset": asset, "ssh_public_key": shop.customer_public_key, **fields}
    if language is not None:
        body["language"] = language
    return order_posted(Client(), body)


def paid_on_the_chain(shop: Shop, *sends) -> list[str]:  # noqa: ANN002 - PaymentRequests, or (PaymentRequest, amount)
    """Each payment request (or `(request, amount)`: that many whole units, else its whole quote) paid from the local
    chain's funded account to its deposit address; then two more blocks, which make the transfers final, and one
    verification pass (`scan_payments`) that finds them all. The transfers' tx hashes, in order."""
    from payments.devnet import devnet_pay
    from payments.networks import rpc_client

    tx_hashes = []
    for send in sends:
        payment, amount = send if isinstance(send, tuple) else (send, None)
        tx_hashes.append(devnet_pay(client=rpc_client(payment.asset.network), payment=payment, amount=amount))
    shop.anvil.mine(2)
    call_command("scan_payments")
    return tx_hashes

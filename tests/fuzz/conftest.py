"""Fuzz suite fixtures: a shop with free lots on the local chain, an order to aim at, and the case counts."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from django.utils import translation

from tests.fuzz.helpers import CASES_TRIED, STATUSES
from tests.placing import api_client, order_posted  # noqa: F401 - a shared fixture

FREE_LOTS = 8


@pytest.fixture
def shop_with_lots(anvil, make_node, only_local_network):  # noqa: F811 - the imported fixture
    """Free lots to order, and only the `local` network (served by the session's anvil) offered."""
    for _ in range(FREE_LOTS):
        make_node()


@pytest.fixture
def placed_order(shop_with_lots, order_payload) -> dict:
    """The 201 body of a one-lot order, placed through the API."""
    return order_posted(Client(), order_payload)


@pytest.fixture
def operator_token(db) -> str:
    """The DRF token of a staff user in the operators group."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    call_command("add_staff", "olga", "--role", "operator", "--password", "a-long-operator-password")
    return Token.objects.create(user=get_user_model().objects.get(username="olga")).key


@pytest.fixture
def wsgi_inside_the_test_transaction():
    """Calling the WSGI app directly fires request_started/finished, whose handler closes the database
    connection, and with it the test's transaction. Django's own test client detaches it the same way."""
    language = translation.get_language()
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
    # The locale middleware leaves the last request's language active in this thread (a fuzzed cookie can
    # ask for Spanish): the next test must not inherit it.
    translation.activate(language)


def pytest_terminal_summary(terminalreporter) -> None:
    if not CASES_TRIED:
        return
    terminalreporter.section("fuzz cases tried")
    for name, count in sorted(CASES_TRIED.items()):
        statuses = ", ".join(f"{status}: {n}" for status, n in sorted(STATUSES[name].items()))
        terminalreporter.write_line(f"{count:6d}  {name}  ({statuses})")
    terminalreporter.write_line(f"{sum(CASES_TRIED.values()):6d}  in all")

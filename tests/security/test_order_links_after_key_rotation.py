"""Rotating DJANGO_SECRET_KEY keeps the emailed order links working while the old key is in
DJANGO_SECRET_KEY_FALLBACKS; new links use the new key; without the old key the old links open nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from orders.models import Order
from orders.order_links import order_access_token
from tests.security.helpers import page_path

NEW_KEY = "a-freshly-rotated-secret-key-for-the-order-links-0123456789"  # noqa: S105


def opens(placed: dict) -> tuple[int, int]:
    """The API's and the page's answer to the link the customer was sent before the rotation."""
    client = Client()
    api = client.get(f"/api/v1/orders/{placed['reference']}/", headers={"X-Order-Token": placed["access_token"]})
    return api.status_code, client.get(page_path(placed)).status_code


@pytest.mark.django_db
def test_a_link_minted_under_the_old_key_opens_the_order_while_that_key_is_a_fallback(placed, settings):
    # Given an order whose link was minted (and emailed) under the current key
    old_key = settings.SECRET_KEY
    assert opens(placed) == (200, 200)

    # When the operator rotates the key and keeps the old one as a fallback
    settings.SECRET_KEY = NEW_KEY
    settings.SECRET_KEY_FALLBACKS = [old_key]

    # Then the old link still opens the order, in the API and on its page
    assert opens(placed) == (200, 200)
    # And new links use the new key, and open it too
    order = Order.objects.get(reference=placed["reference"])
    fresh = order_access_token(order)
    assert fresh != placed["access_token"]
    fresh_link = placed["status_url"].replace(placed["access_token"], fresh)
    assert opens({**placed, "access_token": fresh, "status_url": fresh_link}) == (200, 200)


@pytest.mark.django_db
def test_a_link_minted_under_the_old_key_opens_nothing_once_that_key_is_gone(placed, settings):
    settings.SECRET_KEY = NEW_KEY
    settings.SECRET_KEY_FALLBACKS = []

    assert opens(placed) == (404, 404)


def test_the_fallback_keys_come_from_the_environment_comma_separated():
    from tests.project.test_settings import start_django

    code = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY_FALLBACKS)"
    started = start_django("config.settings.base", code, DJANGO_SECRET_KEY_FALLBACKS="old-key-one, old-key-two")

    assert started.returncode == 0, started.stderr
    assert started.stdout.strip().splitlines()[-1] == "['old-key-one', 'old-key-two']"

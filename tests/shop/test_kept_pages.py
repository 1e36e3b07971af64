"""Home and the catalog page kept whole (core/page_cache.py): each visitor still gets a CSRF token of their
own that works, a visitor with choices of their own never sees the page kept for everyone, and what the page
shows (the free lots, the language) is never served from another version."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client

from core.page_cache import _hole
from provisioning.models import Node

pytestmark = [pytest.mark.django_db]


def csrf_field(page: bytes) -> str:
    return re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()


@pytest.mark.parametrize("path", ["/", "/order/"])
def test_a_kept_page_gives_each_visitor_a_token_of_their_own_that_works(make_node, path):
    # Given the page kept by a first visitor
    make_node()
    first = Client(enforce_csrf_checks=True)
    first.get(path)

    # When a second visitor, whose client checks CSRF, opens it and changes the language with its form
    second = Client(enforce_csrf_checks=True)
    page = second.get(path)
    token = csrf_field(page.content)
    changed = second.post("/i18n/setlang/", {"csrfmiddlewaretoken": token, "language": "fr", "next": path})

    # Then its token is not the first visitor's, no placeholder is left, and the form is accepted
    assert token != csrf_field(first.get(path).content)
    holes = [_hole(name, settings.SECRET_KEY) for name in ("csrf_token", "server_now")]
    assert not [hole for hole in holes if hole in page.content.decode()]
    assert changed.status_code == 302
    assert second.get(path).headers["Content-Language"] == "fr"


def test_the_kept_home_page_follows_the_free_lots(client, make_node):
    # Given the home page kept while two lots are free
    make_node()
    make_node()
    assert "2 lots" in " ".join(client.get("/").content.decode().split())

    # When a node leaves the fleet
    Node.objects.first().delete()

    # Then the next visit counts one (the kept page is keyed by the count shown)
    page = " ".join(client.get("/").content.decode().split())
    assert "1 lot" in page and "2 lots" not in page


def test_a_visitor_with_choices_of_their_own_never_gets_the_page_kept_for_everyone(client, make_node):
    # Given the catalog page kept for new visitors (1 lot)
    for _ in range(4):
        make_node()
    Client().get("/order/")

    # When a visitor who chose 2 lots comes back to the first step
    client.post("/order/", {"lots": 2, "duration_days": 30, "preparation": "bare-node", "refresh": "1"})
    page = client.get("/order/").content.decode()

    # Then the page shows their choice
    assert re.search(r'name="lots"[^>]*value="2"', page), page[:2000]


def test_each_language_has_its_own_kept_page(make_node):
    make_node()
    english = Client(headers={"Accept-Language": "en"}).get("/")
    spanish = Client(headers={"Accept-Language": "es"}).get("/")

    assert english.headers["Content-Language"] == "en" and spanish.headers["Content-Language"] == "es"
    assert english.content != spanish.content
    assert b'lang="es"' in spanish.content

"""The shop's icon: named by every page of the shop, and at /favicon.ico for pages that name none (the admin's),
where browsers used to get a 404 (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

pytestmark = pytest.mark.django_db


def test_every_shop_page_names_the_icon_and_it_exists():
    page = Client().get("/").content.decode()

    assert '<link rel="icon" href="/static/img/favicon.svg" type="image/svg+xml">' in page
    icon = finders.find("img/favicon.svg")
    assert icon and Path(icon).read_text(encoding="utf-8").startswith("<svg")


def test_favicon_ico_leads_to_the_icon_instead_of_a_404():
    answer = Client().get("/favicon.ico")

    assert answer.status_code == 301
    assert answer["Location"] == "/static/img/favicon.svg"

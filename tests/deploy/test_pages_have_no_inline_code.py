"""Every page renders without an inline script, a `style=` attribute or an event handler: the CSP needs
no `unsafe-inline`, and a page that broke this would lose its behaviour or looks in the browser."""

from __future__ import annotations

import pytest

from tests.deploy.pages import customer_pages, inline_code, order_pages, staff_pages


@pytest.mark.django_db
def test_no_page_of_the_shop_the_order_or_the_staff_has_inline_code(client, placed_order, ssh_public_key):
    # Given the pages a customer, an operator and an administrator see
    pages = customer_pages(client, ssh_public_key=ssh_public_key)
    pages += order_pages(client, status_url=placed_order["status_url"], reference=placed_order["reference"])
    pages += staff_pages(client, reference=placed_order["reference"])

    # When each is rendered / Then none holds code that the Content-Security-Policy would block
    found = {page.name: inline_code(page.html) for page in pages}
    assert {name: items for name, items in found.items() if items} == {}


@pytest.mark.django_db
def test_every_shop_page_loads_its_scripts_as_deferred_files(client, placed_order, ssh_public_key):
    pages = customer_pages(client, ssh_public_key=ssh_public_key)
    pages += order_pages(client, status_url=placed_order["status_url"], reference=placed_order["reference"])

    for page in pages:
        if page.name == "not found":
            continue
        assert '/js/site.js" defer' in page.html, page.name


def test_the_inline_code_finder_finds_what_it_must():
    """The finder itself: each kind of inline code is caught, files and data blocks are not."""
    html = (
        '<script src="/static/js/site.js" defer></script>'
        '<script type="application/json" id="data">{"a": 1}</script>'
        "<script>alert(1)</script>"
        '<p style="color: red">'
        "<style>p {}</style>"
        '<button onclick="go()">'
        '<a href="javascript:void(0)">'
    )

    found = inline_code(html)

    assert len(found) == 5, found

"""The 500 handler tells a database outage (503, Retry-After, a short message) from a bug (the plain 500)."""

from __future__ import annotations

import json

from django.db import OperationalError
from django.test import RequestFactory
from django.utils import translation

from core.errors import server_error


def handled(path: str, error: Exception):
    """What Django's 500 handler answers for `error`, called as Django calls it: inside its `except` block."""
    request = RequestFactory().get(path)
    try:
        raise error
    except Exception:
        return server_error(request)


def test_the_database_down_under_the_api_is_a_503_with_a_json_message_and_retry_after():
    response = handled("/api/v1/catalog/", OperationalError("connection refused"))

    assert (response.status_code, response["Retry-After"]) == (503, "10")
    assert json.loads(response.content) == {
        "detail": "The service is briefly unavailable. Please try again in a minute."
    }


def test_the_database_down_on_a_page_is_a_short_503_page_without_the_error():
    response = handled("/", OperationalError('connection to server at "db" failed'))

    assert response.status_code == 503
    assert b"The service is briefly unavailable." in response.content
    assert b"db" not in response.content and len(response.content) < 300


def test_the_503_page_speaks_the_customers_language():
    with translation.override("fr"):
        response = handled("/", OperationalError("the database system is shutting down"))

    assert response.status_code == 503
    assert "Le service est momentanément indisponible." in response.content.decode()


def test_any_other_error_is_still_the_plain_500():
    response = handled("/api/v1/catalog/", RuntimeError("a bug"))

    assert response.status_code == 500
    assert not response.has_header("Retry-After")
    assert b"a bug" not in response.content

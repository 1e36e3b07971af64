"""METRICS_TOKEN: a token that could be guessed, or that holds what a header would mangle, stops the start."""

from __future__ import annotations

import secrets

import pytest

from tests.project.test_settings import start_django


@pytest.mark.parametrize(
    "token", ["short-token", "a" * 31, "a" * 40 + " b", "ä" * 40], ids=["short", "31-chars", "space", "not-ascii"]
)
def test_a_metrics_token_that_could_be_guessed_or_mangled_stops_the_start(token):
    started = start_django("config.settings.base", METRICS_TOKEN=token)

    assert started.returncode != 0
    assert "ImproperlyConfigured: METRICS_TOKEN must be at least 32 letters and digits" in started.stderr


def test_a_long_random_metrics_token_starts():
    started = start_django("config.settings.base", METRICS_TOKEN=secrets.token_hex(32))

    assert started.returncode == 0, started.stderr

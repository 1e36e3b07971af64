"""With DEBUG off every settings module (base, production, test) refuses the development values, and cookies are
secure; bad input fails loudly; the default settings pass checks."""

from __future__ import annotations

import base64
import secrets
import subprocess
import sys

import pytest
from bip_utils import Bip39MnemonicGenerator, Bip39SeedGenerator, Bip39WordsNum, Bip44, Bip44Changes, Bip44Coins
from django.core.management.utils import get_random_secret_key

from config.settings.base import DEV_MANIFEST_SIGNING_KEY, DEV_PAYMENTS_XPUB, DEV_SECRET_KEY
from tests.project.conftest import clean_environment
from tests.servers import ROOT

SETUP = "import django; django.setup(); from django.conf import settings; print('DEBUG', settings.DEBUG)"
COOKIES = (
    "import django; django.setup(); from django.conf import settings; "
    "print('DEBUG', settings.DEBUG, 'SECURE', settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE)"
)
# What `config/wsgi.py` and `manage.py` pick by default, what production runs, and the suite's own: with DEBUG off
# each refuses the development values ("whatever DJANGO_SETTINGS_MODULE is"); the suite runs with DEBUG on.
SETTINGS_MODULES = ["config.settings.base", "config.settings.production", "config.settings.test"]


def random_account() -> Bip44:
    mnemonic = Bip39MnemonicGenerator().FromWordsNumber(Bip39WordsNum.WORDS_NUM_24).ToStr()
    return Bip44.FromSeed(Bip39SeedGenerator(mnemonic).Generate(), Bip44Coins.ETHEREUM).Purpose().Coin().Account(0)


def real_values(**overrides: str) -> dict[str, str]:
    values = {
        "DJANGO_SECRET_KEY": get_random_secret_key(),
        "PAYMENTS_XPUB": random_account().PublicKey().ToExtended(),
        "DJANGO_ALLOWED_HOSTS": "shop.example.org",
        "MANIFEST_SIGNING_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
    }
    values.update(overrides)
    return {key: value for key, value in values.items() if value is not None}


def start_django(settings_module: str, code: str = SETUP, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean_environment(DJANGO_SETTINGS_MODULE=settings_module, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_starts_with_real_values_and_debug_off():
    started = start_django("config.settings.production", **real_values())

    assert started.returncode == 0, started.stderr
    assert "DEBUG False" in started.stdout


DEVELOPMENT_VALUES = [
    (
        "no secret key",
        real_values(DJANGO_SECRET_KEY=None),
        "DJANGO_SECRET_KEY is the development key: set a secret one",
    ),
    (
        "the development secret key",
        real_values(DJANGO_SECRET_KEY=DEV_SECRET_KEY),
        "DJANGO_SECRET_KEY is the development key: set a secret one",
    ),
    (
        "no payments key",
        real_values(PAYMENTS_XPUB=None),
        "PAYMENTS_XPUB is the development key: set the shop's own account xpub",
    ),
    (
        "the development payments key",
        real_values(PAYMENTS_XPUB=DEV_PAYMENTS_XPUB),
        "PAYMENTS_XPUB is the development key: set the shop's own account xpub",
    ),
    (
        "the development manifest key",
        real_values(MANIFEST_SIGNING_KEY=DEV_MANIFEST_SIGNING_KEY),
        "MANIFEST_SIGNING_KEY is the development key: set the shop's own Ed25519 key",
    ),
    (
        "the development secret key kept as a fallback",
        real_values(DJANGO_SECRET_KEY_FALLBACKS=f"an-old-rotated-key,{DEV_SECRET_KEY}"),
        "DJANGO_SECRET_KEY_FALLBACKS holds the development key: remove it",
    ),
    (
        "no allowed hosts",
        real_values(DJANGO_ALLOWED_HOSTS=None),
        "DJANGO_ALLOWED_HOSTS must name the site's host names",
    ),
]


@pytest.mark.parametrize("settings_module", SETTINGS_MODULES)
@pytest.mark.parametrize(("what", "env", "message"), DEVELOPMENT_VALUES)
def test_debug_off_refuses_to_start_with_a_development_value_whatever_the_settings_module(
    settings_module, what, env, message
):
    started = start_django(settings_module, **{**env, "DJANGO_DEBUG": "0"})

    assert started.returncode != 0, f"{settings_module} started with {what} and DEBUG off"
    assert "ImproperlyConfigured" in started.stderr
    assert message in started.stderr


def test_production_refuses_the_development_values_with_debug_unset():
    started = start_django("config.settings.production", **real_values(DJANGO_SECRET_KEY=DEV_SECRET_KEY))

    assert started.returncode != 0
    assert "DJANGO_SECRET_KEY is the development key: set a secret one" in started.stderr


@pytest.mark.parametrize("settings_module", SETTINGS_MODULES)
def test_debug_off_with_fresh_values_starts_with_secure_cookies_whatever_the_settings_module(settings_module):
    started = start_django(settings_module, COOKIES, **real_values(DJANGO_DEBUG="0"))

    assert started.returncode == 0, started.stderr
    assert started.stdout.strip().splitlines()[-1] == "DEBUG False SECURE True True"


def test_debug_on_keeps_the_development_values_and_plain_http_cookies_for_make_run():
    started = start_django("config.settings.base", COOKIES)

    assert started.returncode == 0, started.stderr
    assert started.stdout.strip().splitlines()[-1] == "DEBUG True SECURE False False"


@pytest.mark.parametrize(
    ("what", "make_key"),
    [
        ("a private account key (xprv)", lambda: random_account().PrivateKey().ToExtended()),
        ("a change-level key", lambda: random_account().Change(Bip44Changes.CHAIN_EXT).PublicKey().ToExtended()),
        ("garbage", lambda: "xpub-not-a-key"),
    ],
)
def test_production_refuses_to_start_with_a_payments_xpub_that_is_not_an_account_public_key(what, make_key):
    """The server is watch-only: a private key, or a key that cannot derive deposit addresses, stops the start,
    not the first customer's checkout."""
    started = start_django("config.settings.production", **real_values(PAYMENTS_XPUB=make_key()))

    assert started.returncode != 0, f"production started with {what} in PAYMENTS_XPUB"
    assert "ImproperlyConfigured" in started.stderr
    assert "PAYMENTS_XPUB" in started.stderr


@pytest.mark.parametrize("settings_module", ["config.settings.base", "config.settings.production"])
def test_a_debug_flag_that_is_not_a_boolean_fails_loudly(settings_module):
    started = start_django(settings_module, **real_values(DJANGO_DEBUG="maybe"))

    assert started.returncode != 0
    assert "ImproperlyConfigured: DJANGO_DEBUG='maybe' is not a boolean" in started.stderr


def test_an_integer_setting_that_is_not_a_number_fails_loudly():
    started = start_django("config.settings.base", PAYMENT_WINDOW_MINUTES="thirty")

    assert started.returncode != 0
    assert "ImproperlyConfigured: PAYMENT_WINDOW_MINUTES='thirty' is not an integer" in started.stderr


def test_debug_on_in_production_settings_accepts_the_development_values():
    started = start_django("config.settings.production", DJANGO_DEBUG="1")

    assert started.returncode == 0, started.stderr
    assert "DEBUG True" in started.stdout


def test_the_default_settings_pass_django_system_checks():
    checked = subprocess.run(
        [sys.executable, "manage.py", "check", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "System check identified no issues" in checked.stdout


def test_production_with_real_values_passes_djangos_deployment_checks():
    checked = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=clean_environment(DJANGO_SETTINGS_MODULE="config.settings.production", **real_values()),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "System check identified no issues" in checked.stdout

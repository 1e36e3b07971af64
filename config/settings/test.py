"""Settings for the test suite: real servers when DATABASE_URL / CELERY_BROKER_URL are set."""

from __future__ import annotations

import os

from config.settings.base import *  # noqa: F403
from config.settings.base import DATABASES

# One test database per pytest process, so two runs on one server never drop each other's database.
if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":  # SQLite tests use memory anyway
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("TEST_DATABASE_NAME", f"test_shop_{os.getpid()}")}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
# Tasks run in-process unless a test starts a real worker (those tests override this).
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
# The suite places many orders from 127.0.0.1; tests/security turns the limits back on.
RATELIMIT_ENABLE = False
# client.login() has no request, which django-axes needs; tests/security/test_staff_login.py turns it on.
AXES_ENABLED = False
# Every pass checks the coin at watched addresses (payments.coin_watch), so that a test's next pass sees coin
# sent to a token order's address; tests/payments/verification/test_coin_watch.py sets the production interval.
COIN_CHECK_SECONDS = 0
# Every pass reads the head even with nothing watched (tests look at the health a pass records);
# tests/payments/verification/test_idle_pass.py sets the production interval.
IDLE_PASS_SECONDS = 0

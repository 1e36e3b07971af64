"""Settings for the test suite: real servers when DATABASE_URL / CELERY_BROKER_URL are set."""

from __future__ import annotations

from config.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
# Tasks run in-process unless a test starts a real worker (those tests override this).
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True

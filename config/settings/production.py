"""Production: DEBUG off, secure cookies and headers, and no development key accepted."""

from __future__ import annotations

from config.settings.base import *  # noqa: F403
from config.settings.base import MIDDLEWARE as BASE_MIDDLEWARE
from config.settings.env import env_bool, env_int

DEBUG = env_bool("DJANGO_DEBUG", False)
# With DEBUG off the development keys and hosts are refused at start-up, as in every settings module
# (config/apps.py, after this module's values are final).

# Static files served by the web process itself, compressed and with hashed names: WhiteNoise right after
# SecurityMiddleware, as it asks (a new list: base's stays as it is).
_BASE_MIDDLEWARE = list(BASE_MIDDLEWARE)
_AFTER_SECURITY = _BASE_MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1
MIDDLEWARE = [*_BASE_MIDDLEWARE[:_AFTER_SECURITY], "whitenoise.middleware.WhiteNoiseMiddleware"]
MIDDLEWARE += _BASE_MIDDLEWARE[_AFTER_SECURITY:]
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
# Container and load-balancer health checks ask over plain HTTP from inside.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"

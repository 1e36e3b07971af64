"""Production: DEBUG off, secure cookies and headers, and no development key accepted."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from config.settings.base import *  # noqa: F403
from config.settings.base import DEV_MANIFEST_SIGNING_KEY, DEV_PAYMENTS_XPUB, DEV_SECRET_KEY
from config.settings.env import env_bool, env_int, env_str

DEBUG = env_bool("DJANGO_DEBUG", False)

if not DEBUG:
    if SECRET_KEY == DEV_SECRET_KEY:  # noqa: F405
        raise ImproperlyConfigured("DJANGO_SECRET_KEY is the development key: set a secret one")
    if PAYMENTS_XPUB == DEV_PAYMENTS_XPUB:  # noqa: F405
        raise ImproperlyConfigured("PAYMENTS_XPUB is the development key: set the shop's own account xpub")
    if MANIFEST_SIGNING_KEY == DEV_MANIFEST_SIGNING_KEY:  # noqa: F405
        raise ImproperlyConfigured("MANIFEST_SIGNING_KEY is the development key: set the shop's own Ed25519 key")
    if env_str("DJANGO_ALLOWED_HOSTS", "") == "":
        raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must name the site's host names")

# Static files served by the web process itself, compressed and with hashed names.
MIDDLEWARE = [MIDDLEWARE[0], "whitenoise.middleware.WhiteNoiseMiddleware", *MIDDLEWARE[1:]]  # noqa: F405
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
# Container and load-balancer health checks ask over plain HTTP from inside.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
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

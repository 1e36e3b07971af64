"""The project's own app: at start-up, whatever DJANGO_SETTINGS_MODULE is, DEBUG off refuses development values.

Every settings module (base, production, test, or an operator's own) passes through django.setup(), which calls
ready() once the final values are known: a module that sets DEBUG after base (production) is checked as run.
"""

from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import pgettext_lazy

from config.settings.base import DEV_ALLOWED_HOSTS, DEV_MANIFEST_SIGNING_KEY, DEV_PAYMENTS_XPUB, DEV_SECRET_KEY


def development_values_in_use() -> list[str]:
    """What is still a development value, each naming its variable and what to do."""
    problems = []
    if settings.SECRET_KEY == DEV_SECRET_KEY:
        problems.append("DJANGO_SECRET_KEY is the development key: set a secret one")
    if DEV_SECRET_KEY in settings.SECRET_KEY_FALLBACKS:
        problems.append("DJANGO_SECRET_KEY_FALLBACKS holds the development key: remove it")
    if settings.PAYMENTS_XPUB == DEV_PAYMENTS_XPUB:
        problems.append("PAYMENTS_XPUB is the development key: set the shop's own account xpub")
    if settings.MANIFEST_SIGNING_KEY == DEV_MANIFEST_SIGNING_KEY:
        problems.append("MANIFEST_SIGNING_KEY is the development key: set the shop's own Ed25519 key")
    if not settings.ALLOWED_HOSTS or list(settings.ALLOWED_HOSTS) == DEV_ALLOWED_HOSTS:
        problems.append("DJANGO_ALLOWED_HOSTS must name the site's host names")
    return problems


class ProjectConfig(AppConfig):
    name = "config"
    verbose_name = pgettext_lazy("staff", "Project configuration")

    def ready(self) -> None:
        if settings.DEBUG:
            return  # `make run` and the suite: the embedded development values are the point
        problems = development_values_in_use()
        if problems:
            raise ImproperlyConfigured("; ".join(problems))

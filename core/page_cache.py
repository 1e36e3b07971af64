"""Whole pages kept in the cache, with holes for what is per request: the CSRF token and the server's clock.

A page whose only per-request content is its forms' CSRF token (home, the catalog page for a new visitor, an
order's page while nothing changed) is rendered once with placeholders there, kept, and served by filling the
placeholders in: the visitor's own token (so the CSRF cookie is set exactly as a fresh render would set it)
and the time now. The caller chooses the key: it must name everything else the page shows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import lru_cache

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.utils import timezone
from django.utils.crypto import salted_hmac

KEY_PREFIX = "page:v1:"


@lru_cache(maxsize=8)
def _hole(name: str, secret: str) -> str:
    """A placeholder nobody can type into a page on purpose: derived from the secret key, the same in every
    process that shares the cache."""
    return "hole" + salted_hmac("core.page_cache", name, secret=secret, algorithm="sha256").hexdigest()[:32]


def page_key(*parts: object) -> str:
    return KEY_PREFIX + hashlib.blake2b(repr(parts).encode(), digest_size=20).hexdigest()


def page_kept(
    request: HttpRequest,
    *,
    key: str,
    seconds: int,
    render: Callable[[dict[str, str]], HttpResponse],
) -> HttpResponse:
    """The page under `key`, rendered by `render(holes)` when not kept (`holes` goes into its context), kept
    for `seconds` when it rendered a 200, and always served with the holes filled for this request."""
    csrf_hole, now_hole = _hole("csrf_token", settings.SECRET_KEY), _hole("server_now", settings.SECRET_KEY)
    kept = cache.get(key)
    if kept is None:
        response = render({"csrf_token": csrf_hole, "server_now": now_hole})
        content, content_type = response.content.decode(response.charset), response.headers["Content-Type"]
        if response.status_code == 200:
            cache.set(key, (content, content_type), seconds)
        status = response.status_code
    else:
        (content, content_type), status = kept, 200
    if csrf_hole in content:  # a page without a form sets no CSRF cookie
        content = content.replace(csrf_hole, get_token(request))
    filled = content.replace(now_hole, timezone.now().isoformat())
    return HttpResponse(filled, content_type=content_type, status=status)

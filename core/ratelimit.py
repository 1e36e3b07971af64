"""Per-client-IP rate limits on placing orders, "I have paid", extending a rental, "Find my order" and order-token
guesses; and per email address on "Find my order".

Counters live in the default Django cache (`CACHE_URL`), in fixed windows. `RATELIMIT_ENABLE` is read
at request time, so tests and load runs can flip it. A limited request gets 429 with `Retry-After`
(seconds): JSON `{"detail": ...}` under /api/, a small translated page elsewhere.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from core.email_address import email_match_key

# (url name, method) -> bucket. Every request counts against its bucket.
COUNTED: dict[tuple[str, str | None], str] = {
    ("api_order_create", "POST"): "orders",
    ("shop:order_review", "POST"): "orders",
    ("api_order_paid", "POST"): "paid",
    ("shop:order_paid", "POST"): "paid",
    ("api_order_lookup", "POST"): "lookups",
    ("shop:order_find", "POST"): "lookups",
    ("api_order_extend", "POST"): "extensions",
    ("shop:order_extend", "POST"): "extensions",
    ("api_order_ssh_key", "POST"): "key_changes",
    ("shop:order_ssh_key", "POST"): "key_changes",
    ("api_order_link_rotate", "POST"): "link_rotations",
    ("shop:order_link_rotate", "POST"): "link_rotations",
}
# Views that check an order token: a 404 counts as a failed guess, and past the limit they all answer 429.
# Every one of them: a view left out is a free guessing oracle (tests/security/test_ratelimit.py).
TOKEN_CHECKED = {
    "api_order_detail",
    "api_order_paid",
    "api_order_extend",
    "api_refund_address",
    "shop:order_status",
    "shop:order_paid",
    "shop:order_extend",
    "api_order_ssh_key",
    "shop:order_ssh_key",
    "shop:refund_address",
    "shop:order_manifest",
    "shop:order_receipt",
    "api_order_link_rotate",
    "shop:order_link_rotate",
}


@dataclass(frozen=True)
class Limit:
    count: int
    window_s: int


def limits() -> dict[str, Limit]:
    return {
        "orders": Limit(settings.RATELIMIT_ORDERS, settings.RATELIMIT_WINDOW_S),
        "paid": Limit(settings.RATELIMIT_PAID, settings.RATELIMIT_WINDOW_S),
        # Each extension opened watches a new address for days: few are ever needed.
        "extensions": Limit(settings.RATELIMIT_EXTENSIONS, settings.RATELIMIT_WINDOW_S),
        # Each key replaced on an active rental rewrites the account on every node.
        "key_changes": Limit(settings.RATELIMIT_KEY_CHANGES, settings.RATELIMIT_WINDOW_S),
        # Each new link is an email to the order's address: as few as key changes.
        "link_rotations": Limit(settings.RATELIMIT_KEY_CHANGES, settings.RATELIMIT_WINDOW_S),
        "token_failures": Limit(settings.RATELIMIT_TOKEN_FAILURES, settings.RATELIMIT_WINDOW_S),
        "lookups": Limit(settings.RATELIMIT_LOOKUPS, settings.RATELIMIT_WINDOW_S),
        # Its own, longer window: it caps the emails a stranger can make one address receive.
        "lookups_per_email": Limit(settings.RATELIMIT_LOOKUPS_PER_EMAIL, settings.RATELIMIT_LOOKUPS_EMAIL_WINDOW_S),
    }


def email_key(email: str) -> str:
    """An accepted email address as a counter's key: the address "Find my order" matches (core.email_address, so
    every spelling that reaches the same orders is one counter), hashed so the cache holds no address."""
    return hashlib.sha256(email_match_key(email).encode()).hexdigest()


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, or the address the last of `RATELIMIT_TRUSTED_PROXIES` proxies saw in X-Forwarded-For."""
    proxies = settings.RATELIMIT_TRUSTED_PROXIES
    remote: str = request.META.get("REMOTE_ADDR", "")
    if proxies <= 0:
        return remote
    forwarded: str = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    if len(hops) < proxies:
        return hops[0] if hops else remote
    return hops[-proxies]


def _key(bucket: str, ip: str, window_s: int, now: float) -> tuple[str, int]:
    window = int(now // window_s)
    retry_after = int((window + 1) * window_s - now) + 1
    return f"ratelimit:{bucket}:{ip}:{window}", retry_after


def count(bucket: str, ip: str, *, now: float | None = None) -> int:
    limit = limits()[bucket]
    key, _retry = _key(bucket, ip, limit.window_s, time.time() if now is None else now)
    cache.add(key, 0, timeout=limit.window_s + 1)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=limit.window_s + 1)
        return 1


def exceeded(bucket: str, ip: str, *, now: float | None = None) -> int | None:
    """Seconds to wait if `ip` has used up `bucket` in this window, else None."""
    limit = limits()[bucket]
    key, retry_after = _key(bucket, ip, limit.window_s, time.time() if now is None else now)
    used = cache.get(key, 0)
    return retry_after if used >= limit.count else None


def too_many(request: HttpRequest, retry_after: int, message: str = "") -> HttpResponse:
    message = message or _("Too many requests. Please try again in %(seconds)s seconds.") % {"seconds": retry_after}
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": message}, status=429)
    else:
        response = render(request, "429.html", {"message": message}, status=429)
    response["Retry-After"] = str(retry_after)
    return response


class RateLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if (
            settings.RATELIMIT_ENABLE
            and match is not None
            and match.view_name in TOKEN_CHECKED
            and response.status_code == 404
        ):
            count("token_failures", client_ip(request))
        return response

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., HttpResponse],
        view_args: tuple[object, ...],
        view_kwargs: dict[str, object],
    ) -> HttpResponse | None:
        if not settings.RATELIMIT_ENABLE:
            return None
        name = request.resolver_match.view_name if request.resolver_match else ""
        ip = client_ip(request)
        if name in TOKEN_CHECKED:
            retry_after = exceeded("token_failures", ip)
            if retry_after:
                return too_many(request, retry_after)
        bucket = COUNTED.get((name, request.method))
        if bucket:
            retry_after = exceeded(bucket, ip)
            if retry_after:
                return too_many(request, retry_after)
            count(bucket, ip)
        return None

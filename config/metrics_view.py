"""/metrics: the Prometheus text format, for loopback clients only unless METRICS_TOKEN is set.

With METRICS_TOKEN set, every client (loopback too) needs `Authorization: Bearer <token>`: 401 without it or
with another token (compared in constant time). Without it, a client that is not on loopback gets 403. A
request that came through a proxy (any forwarding header: X-Forwarded-*, Forwarded, Via, X-Real-IP,
X-Client-IP, True-Client-IP, ...) is never a loopback client, whatever REMOTE_ADDR says: a proxy on the same
machine connects from loopback on behalf of anyone, and a header the client wrote itself proves nothing either.
"""

from __future__ import annotations

import hmac
import ipaddress
import os

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest, multiprocess

from config.metrics import RowsCollector
from core.metrics_http import REQUEST_LATENCY

# The text format every Prometheus version reads (the library's newest type, 1.0.0, only matters for names
# outside ASCII, and Prometheus 3 refuses a type it does not know).
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
# The headers proxies add (each proxy adds its own choice of them: any one is enough to mark the request as
# proxied); every X-Forwarded-* header counts too.
PROXY_HEADERS = (
    "HTTP_FORWARDED",
    "HTTP_VIA",
    "HTTP_X_REAL_IP",
    "HTTP_X_CLIENT_IP",
    "HTTP_TRUE_CLIENT_IP",
    "HTTP_CF_CONNECTING_IP",
    "HTTP_FASTLY_CLIENT_IP",
    "HTTP_X_CLUSTER_CLIENT_IP",
    "HTTP_X_ORIGINAL_FORWARDED_FOR",
)
PROXY_HEADER_PREFIX = "HTTP_X_FORWARDED_"


def came_through_a_proxy(request: HttpRequest) -> bool:
    """Whether the request carries any header a proxy adds (present at all, even empty)."""
    return any(header in PROXY_HEADERS or header.startswith(PROXY_HEADER_PREFIX) for header in request.META)


def is_loopback_client(request: HttpRequest) -> bool:
    if came_through_a_proxy(request):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def has_token(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def registry() -> CollectorRegistry:
    """A registry per scrape: the request histograms (every gunicorn worker's, in multi-process mode) and the
    families computed from the rows."""
    scrape = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(scrape)  # type: ignore[no-untyped-call]  # prometheus-client: unannotated
    else:
        scrape.register(REQUEST_LATENCY)
    scrape.register(RowsCollector())
    return scrape


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if token and not has_token(request, token):
        response = HttpResponse("A bearer token is needed.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if not token and not is_loopback_client(request):
        return HttpResponse(
            "Only loopback clients, unless METRICS_TOKEN is set.\n", status=403, content_type="text/plain"
        )
    response = HttpResponse(generate_latest(registry()), content_type=TEXT_FORMAT)
    response["Cache-Control"] = "no-store"
    return response

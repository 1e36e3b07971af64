"""The request latency histogram of /metrics: one series per resolved view, whatever the path.

The label is the URL pattern's name (`shop:order_page`), never the raw path: a path is chosen by the client, and
one series per path would let anyone grow the server's memory and the monitoring's without bound. A request that
matches no pattern (a 404 from a scanner) is counted under `unresolved`.

Under gunicorn each worker process observes its own requests; with PROMETHEUS_MULTIPROC_DIR set
(prometheus-client's multi-process mode) they are written to files in that folder and /metrics adds up every
worker's, whichever worker answers the scrape. This module imports no app.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from prometheus_client import Histogram

log = logging.getLogger(__name__)

UNRESOLVED = "unresolved"

# Not in the library's default registry: /metrics builds its registry per scrape (config/metrics_view.py).
REQUEST_LATENCY = Histogram(
    "http_request_duration_seconds",
    "Time from the request reaching Django to the response leaving it, by view (the URL pattern's name).",
    ["view"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=None,
)


def view_label(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return UNRESOLVED
    return match.view_name or UNRESOLVED


class RequestLatencyMiddleware:
    """First in MIDDLEWARE, so that the time counted includes every other middleware."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        try:
            REQUEST_LATENCY.labels(view=view_label(request)).observe(time.perf_counter() - started)
        except OSError as exc:  # the multi-process folder missing or full: a page never fails for a metric
            log.warning("request latency not recorded: %s", exc)
        return response

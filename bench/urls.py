"""The shop's URLs plus `/bench/baseline/`: a bare Django view returning a small fixed JSON, served by the same
gunicorn, settings and middleware, that every page's throughput and latency are divided by."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import include, path

BASELINE = {"ok": True, "service": "b200-shop", "bench": "baseline"}


def baseline(request: HttpRequest) -> JsonResponse:
    return JsonResponse(BASELINE)


urlpatterns = [
    path("bench/baseline/", baseline),
    path("", include("config.urls")),
]

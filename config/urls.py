from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from config.health import healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/v1/", include("shop.api_urls")),
    path("healthz", healthz, name="healthz"),
    path("", include("shop.urls")),
]

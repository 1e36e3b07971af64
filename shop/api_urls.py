from __future__ import annotations

from django.urls import path

from provisioning.api import OrderPrepareApi
from shop import advisor_views, api

urlpatterns = [
    path("catalog/", api.CatalogApi.as_view(), name="api_catalog"),
    path("orders/", api.OrderCreateApi.as_view(), name="api_order_create"),
    path("orders/<str:reference>/", api.OrderDetailApi.as_view(), name="api_order_detail"),
    path("orders/<str:reference>/paid/", api.OrderPaidApi.as_view(), name="api_order_paid"),
    path("orders/<str:reference>/prepare/", OrderPrepareApi.as_view(), name="api_order_prepare"),
    path("advisor/", advisor_views.AdvisorApi.as_view(), name="api_advisor"),
]

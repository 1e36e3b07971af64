from __future__ import annotations

from django.urls import path

from payments.api import LedgerCsvApi, RefundApproveApi, RefundRejectApi, TreasuryPlanApi
from provisioning.api import NodeMoveApi, NodeRecheckApi, OrderPrepareApi
from shop import advisor_views, api, lookup_views
from shop.refund_views import RefundAddressApi

urlpatterns = [
    path("catalog/", api.CatalogApi.as_view(), name="api_catalog"),
    path("orders/", api.OrderCreateApi.as_view(), name="api_order_create"),
    path("orders/lookup/", lookup_views.OrderLookupApi.as_view(), name="api_order_lookup"),
    path("orders/<str:reference>/", api.order_detail, name="api_order_detail"),
    path("orders/<str:reference>/paid/", api.OrderPaidApi.as_view(), name="api_order_paid"),
    path("orders/<str:reference>/extend/", api.OrderExtendApi.as_view(), name="api_order_extend"),
    path("orders/<str:reference>/ssh-key/", api.OrderSshKeyApi.as_view(), name="api_order_ssh_key"),
    path("orders/<str:reference>/tokens/rotate/", api.OrderLinkRotateApi.as_view(), name="api_order_link_rotate"),
    path("orders/<str:reference>/prepare/", OrderPrepareApi.as_view(), name="api_order_prepare"),
    path("nodes/<str:name>/recheck/", NodeRecheckApi.as_view(), name="api_node_recheck"),
    path("nodes/<str:name>/move/", NodeMoveApi.as_view(), name="api_node_move"),
    path(
        "orders/<str:reference>/refunds/<str:refund_id>/address/",
        RefundAddressApi.as_view(),
        name="api_refund_address",
    ),
    path("refunds/<str:refund_id>/approve/", RefundApproveApi.as_view(), name="api_refund_approve"),
    path("refunds/<str:refund_id>/reject/", RefundRejectApi.as_view(), name="api_refund_reject"),
    path("treasury/plan/", TreasuryPlanApi.as_view(), name="api_treasury_plan"),
    path("treasury/ledger.csv", LedgerCsvApi.as_view(), name="api_treasury_ledger"),
    path("advisor/", advisor_views.AdvisorApi.as_view(), name="api_advisor"),
]

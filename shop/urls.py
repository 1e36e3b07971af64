from __future__ import annotations

from django.urls import path

from shop import advisor_views, legal_views, lookup_views, views

app_name = "shop"

urlpatterns = [
    path("", views.home, name="home"),
    path("order/", views.order_configure, name="order_configure"),
    path("order/contact/", views.order_contact, name="order_contact"),
    path("order/payment/", views.order_payment, name="order_payment"),
    path("order/review/", views.order_review, name="order_review"),
    path("order/find/", lookup_views.order_find, name="order_find"),
    path("order/find/sent/", lookup_views.order_find_sent, name="order_find_sent"),
    path("o/<str:reference>/<str:token>/", views.order_status, name="order_status"),
    path("o/<str:reference>/<str:token>/paid/", views.order_paid, name="order_paid"),
    path("o/<str:reference>/<str:token>/extend/", views.order_extend, name="order_extend"),
    path("o/<str:reference>/<str:token>/ssh-key/", views.order_ssh_key, name="order_ssh_key"),
    path("o/<str:reference>/<str:token>/link/", views.order_new_link, name="order_link_rotate"),
    path(
        "o/<str:reference>/<str:token>/refunds/<int:refund_id>/address/",
        views.refund_address,
        name="refund_address",
    ),
    path("o/<str:reference>/<str:token>/receipt/", views.order_receipt_page, name="order_receipt"),
    path("o/<str:reference>/<str:token>/manifest.json", views.order_manifest, name="order_manifest"),
    path("advisor/", advisor_views.advisor, name="advisor"),
    path("terms/", legal_views.terms, name="terms"),
    path("privacy/", legal_views.privacy, name="privacy"),
]

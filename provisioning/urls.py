from __future__ import annotations

from django.urls import path

from provisioning import views

app_name = "provisioning"

urlpatterns = [
    path("", views.console, name="console"),
    path("orders/<str:reference>/prepare/", views.prepare, name="prepare"),
    path("runs/<int:run_id>/", views.run_report, name="run"),
    path("nodes/<str:name>/recheck/", views.node_recheck, name="node_recheck"),
    path("outflows/<int:outflow_id>/acknowledge/", views.outflow_acknowledged, name="outflow_acknowledge"),
]

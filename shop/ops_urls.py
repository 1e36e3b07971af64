"""The operator console's URLs, /ops/ (shop/ops_views.py); their namespace stays "provisioning"."""

from __future__ import annotations

from django.urls import path

from shop import ops_views as views

app_name = "provisioning"

urlpatterns = [
    path("", views.console, name="console"),
    path("orders/<str:reference>/prepare/", views.prepare, name="prepare"),
    path("orders/<str:reference>/stop/", views.stop, name="stop"),
    path("runs/<int:run_id>/", views.run_report, name="run"),
    path("nodes/<str:name>/recheck/", views.node_recheck, name="node_recheck"),
    path("nodes/<str:name>/move/", views.node_move, name="node_move"),
    path("moves/<int:move_id>/release/", views.move_files_release, name="move_files_release"),
    path("downtime/<int:hold_id>/decide/", views.downtime_decide, name="downtime_decide"),
    path("outflows/<int:outflow_id>/acknowledge/", views.outflow_acknowledged, name="outflow_acknowledge"),
]

"""The admin addresses of before the app labels matched the packages (docs/architecture.md, "App labels"):
`/admin/shop/order/...` is now `/admin/orders/order/...`, `/admin/provisioning/node/...` `/admin/fleet/node/...`.
Emails sent before the change link the old ones; they redirect, query string and all."""

from __future__ import annotations

from django.apps import apps
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.urls import URLPattern, re_path

MOVED = {"shop": "orders", "provisioning": "fleet"}  # the old label: the app whose models it named


def old_admin_link(request: HttpRequest, new: str, model: str, rest: str) -> HttpResponsePermanentRedirect:
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"/admin/{new}/{model}/{rest}" + (f"?{query}" if query else ""))


def moved_models(new: str) -> str:
    """A regex of the models of app `new`: only those moved (provisioning's own, its checks say, did not)."""
    return "|".join(sorted(m._meta.label_lower.partition(".")[2] for m in apps.get_app_config(new).get_models()))


urlpatterns: list[URLPattern] = [
    re_path(rf"^admin/{old}/(?P<model>{moved_models(new)})/(?P<rest>.*)$", old_admin_link, kwargs={"new": new})
    for old, new in MOVED.items()
]

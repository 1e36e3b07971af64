"""handler403: a refusal that names who can act, and where the person's own work is, instead of a bare 403.

Staff reach pages of other roles by links (a notification, the needs-attention list, a bookmark): the page says
which role acts there (core/roles.py) and links the places the person's own role works in. Customers, who never
have staff permissions, get the same page without the staff part."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.urls import Resolver404, resolve, reverse
from django.utils.translation import pgettext

from core.roles import roles_in_app, roles_with

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractUser, AnonymousUser

OPERATOR = "provisioning.prepare_order"
REVIEWER = "payments.review_payment"
LEDGER = "payments.view_ledger"


def _roles_for(request: HttpRequest) -> list[str]:
    """The roles that may do what the refused request asked for, as far as its URL tells."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return []
    if match.namespace == "provisioning":
        return roles_with(OPERATOR)
    if match.url_name == "admin_ledger":
        return roles_with(LEDGER)
    if match.url_name == "payments_paymentrequest_decide":
        return roles_with(REVIEWER)
    model_admin = getattr(match.func, "model_admin", None)
    if model_admin is not None:
        opts = model_admin.model._meta
        return roles_with(f"{opts.app_label}.view_{opts.model_name}")
    if match.url_name == "app_list":
        return roles_in_app(match.kwargs.get("app_label", ""))
    return []


def _own_work(user: AbstractUser | AnonymousUser) -> list[tuple[str, str]]:
    """(link, words) for each place the person's permissions let them work in."""
    if not user.is_authenticated or not user.is_staff:
        return []
    places = []
    if user.has_perm(REVIEWER):
        words = pgettext("staff", "Payments in review and refunds to approve: the admin's start page")
        places.append((reverse("admin:index"), words))
    if user.has_perm(OPERATOR):
        words = pgettext("staff", "Paid orders, preparations and nodes: the operator console")
        places.append((reverse("provisioning:console"), words))
    if user.has_perm(LEDGER):
        places.append((reverse("admin_ledger"), pgettext("staff", "Every movement of money: the ledger")))
    if not places:
        places.append((reverse("admin:index"), pgettext("staff", "The admin's start page")))
    return places


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    user = getattr(request, "user", None)
    staff = user is not None and user.is_authenticated and user.is_staff
    context = {
        "roles": _roles_for(request) if staff else [],
        "own_work": _own_work(user) if user is not None else [],
        "staff": staff,
    }
    return HttpResponse(loader.render_to_string("403.html", context, request), status=403)

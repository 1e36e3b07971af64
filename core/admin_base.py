"""Admin building blocks shared by the apps: evidence is shown, never edited in place."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import pgettext_lazy

# ModelAdmin and its inlines are generic in the stubs only (subscripting them when the code runs fails). These bases
# serve any model: each subclass names its own `model`, and the apps' subclasses read their own rows.
if TYPE_CHECKING:
    _InlineBase = admin.TabularInline[Any, Any]
    _ModelAdminBase = admin.ModelAdmin[Any]
else:
    _InlineBase = admin.TabularInline
    _ModelAdminBase = admin.ModelAdmin


class ReadOnlyInline(_InlineBase):
    extra = 0
    can_delete = False
    # Django's tabular inline, its sideways-scrolling group reachable by keyboard (a phone scrolls it).
    template = "admin/edit_inline/tabular_read_only.html"

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ReadOnlyAdmin(_ModelAdminBase):
    # A filtered list counts its own rows only, never the whole table's history again (issue 30)
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        label=pgettext_lazy("staff", "Reason"),
        help_text=pgettext_lazy("staff", "Kept in the events."),
    )


def reason_asked(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any], *, title: str, items: list[str]
) -> tuple[str | None, HttpResponse | None]:
    """An admin action's intermediate page: (the reason, None) once given, else (None, the page asking for it)."""
    answers, page = details_asked(model_admin, request, queryset, title=title, items=items, form_class=ReasonForm)
    return (answers["reason"] if answers else None), page


def details_asked(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    title: str,
    items: list[str],
    form_class: type[forms.Form],
) -> tuple[dict[str, Any] | None, HttpResponse | None]:
    """An admin action's intermediate page for a form with a `reason`: (its cleaned data, None) once valid,
    else (None, the page asking for it)."""
    form = form_class(request.POST if "reason" in request.POST else None)
    if form.is_valid():
        return form.cleaned_data, None
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "form": form,
        "items": items,
        "action": request.POST["action"],
        "opts": model_admin.model._meta,
        "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
    }
    return None, render(request, "admin/reason_required.html", context)

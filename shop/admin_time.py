"""Staff add or remove time on a running rental, with a reason (orders.rental_credits.rental_time_adjust): a small form
on the order's admin page, for staff with the `shop.add_rentalcredit` permission; and the credits listed there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import pgettext, pgettext_lazy

from core.admin_base import ReadOnlyInline
from orders.models import Order, OrderStatus, RentalCredit
from orders.rental_credits import REASON_MAX, STAFF_ADJUST_MAX, CreditRefused, rental_time_adjust

ADJUST_PERMISSION = "orders.add_rentalcredit"
MAX_MINUTES = int(STAFF_ADJUST_MAX.total_seconds() // 60)

# ModelAdmin is generic in the stubs only (subscripting it when the code runs fails). The mixin goes before
# ModelAdmin in OrderAdmin's bases: the type checker sees it as one, so its super() calls and admin_site are typed.
if TYPE_CHECKING:
    _OrderAdminBase = admin.ModelAdmin[Order]
else:
    _OrderAdminBase = object


class RentalCreditInline(ReadOnlyInline):
    """Time given back (downtime) or adjusted by staff: each credit, who, why, and the end it made."""

    model = RentalCredit
    fk_name = "order"
    fields = ["created_at", "kind", "seconds", "asked_seconds", "reason", "actor", "node", "ends_at_after"]
    verbose_name = pgettext_lazy("staff", "time credit")
    verbose_name_plural = pgettext_lazy("staff", "Time given back or adjusted")


class TimeAdjustForm(forms.Form):
    minutes = forms.IntegerField(
        min_value=-MAX_MINUTES,
        max_value=MAX_MINUTES,
        label=pgettext_lazy("staff", "Minutes"),
        help_text=pgettext_lazy("staff", "Minutes to add to the rental's end; negative removes time (never past now)."),
    )
    reason = forms.CharField(
        max_length=REASON_MAX,
        widget=forms.Textarea(attrs={"rows": 3}),
        label=pgettext_lazy("staff", "Reason"),
        help_text=pgettext_lazy("staff", "The customer reads it: order page, receipt and the email they get."),
    )


class TimeAdjustAdminMixin(_OrderAdminBase):
    """OrderAdmin's page /admin/orders/order/<id>/time/ and the link to it on the order's page."""

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.time_adjust_view)
        return [path("<path:object_id>/time/", view, name="orders_order_time"), *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = dict(extra_context or {})
        if request.user.has_perm(ADJUST_PERMISSION):
            extra["time_adjust_url"] = reverse("admin:orders_order_time", args=[object_id])
        return super().change_view(request, object_id, form_url, extra)

    def time_adjust_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not request.user.has_perm(ADJUST_PERMISSION):
            raise PermissionDenied
        order = get_object_or_404(Order, pk=object_id)
        form = TimeAdjustForm(request.POST if request.method == "POST" else None)
        if form.is_valid():
            try:
                credit = rental_time_adjust(
                    order_id=order.pk,
                    seconds=form.cleaned_data["minutes"] * 60,
                    reason=form.cleaned_data["reason"],
                    actor=request.user.get_username(),
                )
            except CreditRefused as exc:
                form.add_error(exc.field, exc.message)
            else:
                if credit.seconds > 0:
                    done = pgettext(
                        "staff",
                        "%(minutes)s min added to %(order)s: it now ends on %(end)s UTC; the customer is told by "
                        "email.",
                    )
                else:
                    done = pgettext(
                        "staff",
                        "%(minutes)s min removed from %(order)s: it now ends on %(end)s UTC; the customer is told by "
                        "email.",
                    )
                end = f"{credit.ends_at_after:%Y-%m-%d %H:%M}"
                done %= {"minutes": abs(credit.seconds) // 60, "order": order.reference, "end": end}
                self.message_user(request, done, messages.SUCCESS)
                return HttpResponseRedirect(reverse("admin:orders_order_change", args=[order.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": pgettext("staff", "Add or remove time: %(order)s") % {"order": order.reference},
            "opts": Order._meta,
            "original": order,
            "form": form,
            "running": order.status == OrderStatus.ACTIVE,
        }
        status = 400 if form.is_bound and form.errors else 200
        return TemplateResponse(request, "admin/orders/order/time_adjust.html", context, status=status)

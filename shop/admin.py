from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Field, Prefetch, QuerySet
from django.forms import Field as FormField
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import pgettext, pgettext_lazy

from core.admin_base import ReadOnlyAdmin, ReadOnlyInline, details_asked, reason_asked
from core.email_address import EmailAddressInvalid, ascii_lower, email_match_key
from core.input_errors import OrderInputError
from core.staff_words import days_text, lots_text
from core.transition_event import TransitionNotAllowed
from orders.models import FIRST_PAYMENTS, Duration, Extension, LotSpec, Order, OrderEvent, Preparation, Reservation
from orders.orders import order_hold_extend
from payments.amount_text import payment_units_text
from payments.models import Credit, PaymentRequest
from payments.review import payment_evidence
from shop.admin_time import RentalCreditInline, TimeAdjustAdminMixin
from shop.cancellation import order_cancel_with_refunds
from shop.forms import EmailAddressField
from shop.personal_data import ErasureRefused, order_personal_data_erase, order_personal_data_export

# ModelAdmin and its inlines are generic in the stubs only (subscripting them when the code runs fails).
if TYPE_CHECKING:
    _LotSpecAdminBase = admin.ModelAdmin[LotSpec]
    _DurationAdminBase = admin.ModelAdmin[Duration]
    _PreparationAdminBase = admin.ModelAdmin[Preparation]
    _OrderAdminBase = admin.ModelAdmin[Order]
    _PaymentRequestInlineBase = admin.StackedInline[PaymentRequest, Order]
else:
    _LotSpecAdminBase = _DurationAdminBase = _PreparationAdminBase = _OrderAdminBase = admin.ModelAdmin
    _PaymentRequestInlineBase = admin.StackedInline


@admin.register(LotSpec)
class LotSpecAdmin(_LotSpecAdminBase):
    list_display = ["__str__", "gpu_model", "gpus_per_lot", "gpu_memory_gb", "memory_type"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not LotSpec.objects.exists()


@admin.register(Duration)
class DurationAdmin(_DurationAdminBase):
    list_display = ["days", "price_per_lot_usd", "purpose_en", "active"]
    list_editable = ["price_per_lot_usd", "active"]


@admin.register(Preparation)
class PreparationAdmin(_PreparationAdminBase):
    list_display = ["slug", "name_en", "position", "active"]
    list_editable = ["position", "active"]
    prepopulated_fields = {"slug": ["name_en"]}


class OrderEventInline(ReadOnlyInline):
    model = OrderEvent
    fields = ["created_at", "from_status", "to_status", "actor", "reason"]


class ReservationInline(ReadOnlyInline):
    model = Reservation
    fields = ["node", "created_at", "expires_at", "released_at", "release_reason"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Reservation]:
        return super().get_queryset(request).select_related("node")  # one row per lot, each naming its node


class PaymentRequestInline(_PaymentRequestInlineBase):
    model = PaymentRequest
    can_delete = False
    show_change_link = True  # the payment's own page: credits, notices, events, review actions
    fields = (
        "extension",
        "asset",
        "chain_id",
        "contract",
        "address",
        "derivation_index",
        "amount",
        "amount_usd",
        "usd_rate",
        "rate_as_of",
        "expires_at",
        "start_block",
        "status",
        "received",
        "confirmations",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[PaymentRequest]:
        # Each payment's "received" is read from its credits (late money too): one query for all of them.
        credits = Credit.objects.on_chain().select_related("network", "asset")
        return (
            super()
            .get_queryset(request)
            .select_related("asset")
            .prefetch_related(Prefetch("credits", queryset=credits, to_attr="shown"))
        )

    def has_add_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False

    @admin.display(description=pgettext_lazy("staff", "amount"))
    def amount(self, payment: PaymentRequest) -> str:
        return payment_units_text(payment, payment.amount_base_units)

    @admin.display(description=pgettext_lazy("staff", "received (in its asset, late money too)"))
    def received(self, payment: PaymentRequest) -> str:
        return payment_evidence(payment, getattr(payment, "shown", None)).received


class ExtensionInline(ReadOnlyInline):
    """More days bought for the rental, each with its own payment request (listed above)."""

    model = Extension
    fields = [
        "duration_days",
        "lots",
        "total_usd",
        "status",
        "created_at",
        "applied_at",
        "ends_at_before",
        "ends_at_after",
    ]


class HoldExtendForm(forms.Form):
    until = forms.DateTimeField(
        label=pgettext_lazy("staff", "Until"),
        help_text=pgettext_lazy("staff", "The new end of the hold, UTC (YYYY-MM-DD HH:MM)."),
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        label=pgettext_lazy("staff", "Reason"),
        help_text=pgettext_lazy("staff", "Kept in the order's events."),
    )


class DurationDaysFilter(admin.SimpleListFilter):
    """The catalog's durations as the choices: Django's own filter for a plain integer reads every order's
    duration (a DISTINCT over the whole table) to offer them."""

    title = pgettext_lazy("staff", "duration")
    parameter_name = "duration_days"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [
            (str(days), days_text(days)) for days in Duration.objects.order_by("days").values_list("days", flat=True)
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Order]) -> QuerySet[Order]:
        value = self.value() or ""
        return queryset.filter(duration_days=int(value)) if value.isdigit() else queryset


@admin.register(Order)
class OrderAdmin(TimeAdjustAdminMixin, _OrderAdminBase):
    list_display = ["reference", "status", "lots", "duration_days", "preparation", "total_usd", "email", "created_at"]
    # Filters that cost no read of the orders: fixed choices, the catalog, and dates relative to today (a date
    # hierarchy would read every order's year, then month, to offer them)
    list_filter = ["status", DurationDaysFilter, "preparation", "language", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["reference", "last_name", "payments__address"]  # and the email: get_search_results
    search_help_text = "A reference, a last name, a payment address, or an email address (or a part of one)."
    list_select_related = ["preparation"]
    show_full_result_count = False  # one count of the filtered rows, not a second of every order ever placed
    inlines = [PaymentRequestInline, ExtensionInline, RentalCreditInline, ReservationInline, OrderEventInline]
    actions = ["cancel_orders", "extend_hold", "export_personal_data", "erase_personal_data"]
    readonly_fields = [
        "reference",
        "status",
        "lots",
        "duration",
        "preparation",
        "duration_days",
        "gpu_model",
        "gpus_per_lot",
        "gpu_memory_gb",
        "price_per_lot_usd",
        "total_usd",
        "ssh_key_fingerprint",
        "language",
        "terms_accepted_at",
        "personal_data_erased_at",
        "created_at",
        "updated_at",
    ]
    fieldsets = [
        (
            "Order",
            {
                "fields": [
                    "reference",
                    "status",
                    "lots",
                    "gpu_model",
                    "gpus_per_lot",
                    "gpu_memory_gb",
                    "duration",
                    "duration_days",
                    "preparation",
                    "price_per_lot_usd",
                    "total_usd",
                    "created_at",
                    "updated_at",
                ]
            },
        ),
        (
            "Contact",
            {
                "fields": [
                    "first_name",
                    "last_name",
                    "email",
                    "language",
                    "ssh_public_key",
                    "ssh_key_fingerprint",
                    "terms_accepted_at",
                    "personal_data_erased_at",
                ]
            },
        ),
        ("Hypothesis", {"fields": ["hypothesis_kind", "hypothesis_text"]}),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # orders are placed by customers, through order_create

    def formfield_for_dbfield(self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any) -> FormField | None:
        if db_field.name == "email":  # what customers may give, stored as they are
            return EmailAddressField(max_length=db_field.max_length, required=True)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Order], search_term: str
    ) -> tuple[QuerySet[Order], bool]:
        # Emails are matched on their key (core.email_address), never with the database's case-insensitive
        # LIKE: UPPER() folds ı and ſ, and an export or an erasure must not pick up a look-alike's orders.
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        try:
            results |= queryset.filter(email_key=email_match_key(term))
        except EmailAddressInvalid:
            if term and term.isascii():
                results |= queryset.filter(email_key__contains=ascii_lower(term))
        return results, may_have_duplicates

    def has_delete_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False  # an order and its evidence are kept

    @admin.action(
        description=pgettext_lazy("staff", "Cancel the selected orders and release their lots"), permissions=["change"]
    )
    def cancel_orders(self, request: HttpRequest, queryset: QuerySet[Order]) -> None:
        for order in queryset:
            try:
                short = order_cancel_with_refunds(
                    order_id=order.pk, actor=request.user.get_username(), reason="cancelled in the admin"
                )
            except TransitionNotAllowed:
                refused = pgettext("staff", "%(order)s: cannot be cancelled from %(status)s")
                refused %= {"order": order.reference, "status": order.status}
                self.message_user(request, refused, messages.WARNING)
            else:
                self.message_user(request, pgettext("staff", "%(order)s: cancelled") % {"order": order.reference})
                for text in short:
                    self.message_user(request, f"{order.reference}: {text}", messages.WARNING)

    def has_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("payments.review_payment")

    @admin.action(
        description=pgettext_lazy("staff", "Hold the selected orders' lots until a new date"), permissions=["review"]
    )
    def extend_hold(self, request: HttpRequest, queryset: QuerySet[Order]) -> HttpResponse | None:
        items = [f"{order.reference}: {order.get_status_display()}, {lots_text(order.lots)}" for order in queryset]
        title = pgettext("staff", "Extend the hold")
        answers, page = details_asked(self, request, queryset, title=title, items=items, form_class=HoldExtendForm)
        if answers is None:
            return page  # a new end and a reason, both kept in the events
        for order in queryset:
            try:
                order_hold_extend(
                    order_id=order.pk,
                    until=answers["until"],
                    reason=answers["reason"],
                    actor=request.user.get_username(),
                )
            except OrderInputError as exc:
                self.message_user(request, f"{order.reference}: {exc.message}", messages.WARNING)
            else:
                held = pgettext("staff", "%(order)s: lots held until %(until)s")
                until = f"{answers['until']:%Y-%m-%d %H:%M}"
                self.message_user(request, held % {"order": order.reference, "until": until})
        return None

    def has_manage_personal_data_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("orders.manage_personal_data")

    @admin.action(
        description=pgettext_lazy("staff", "Export the customers' personal data (JSON)"),
        permissions=["manage_personal_data"],
    )
    def export_personal_data(self, request: HttpRequest, queryset: QuerySet[Order]) -> HttpResponse:
        first = PaymentRequest.objects.filter(extension=None).select_related("asset__network")
        first = first.prefetch_related("notices", "credits")
        orders = queryset.select_related("preparation").prefetch_related(
            Prefetch("payments", queryset=first, to_attr=FIRST_PAYMENTS), "events"
        )
        documents = [order_personal_data_export(order=order) for order in orders]
        response = JsonResponse({"orders": documents}, json_dumps_params={"indent": 2, "ensure_ascii": False})
        response["Content-Disposition"] = 'attachment; filename="personal-data.json"'
        return response

    @admin.action(
        description=pgettext_lazy("staff", "Erase the customers' personal data (keeps the payment evidence)"),
        permissions=["manage_personal_data"],
    )
    def erase_personal_data(self, request: HttpRequest, queryset: QuerySet[Order]) -> HttpResponse | None:
        items = [f"{order.reference}: {order.get_status_display()}, {order.email}" for order in queryset]
        title = pgettext("staff", "Erase personal data")
        reason, page = reason_asked(self, request, queryset, title=title, items=items)
        if reason is None:
            return page  # an erasure needs a reason, kept in the order's events
        for order in queryset:
            try:
                order_personal_data_erase(order_id=order.pk, actor=request.user.get_username(), reason=reason)
            except ErasureRefused as exc:
                self.message_user(request, str(exc), messages.WARNING)
            else:
                erased = pgettext("staff", "%(order)s: personal data erased")
                self.message_user(request, erased % {"order": order.reference})
        return None


@admin.register(OrderEvent)
class OrderEventAdmin(ReadOnlyAdmin):
    """Every order's status changes across orders, newest first (each order's own are inline on its page)."""

    list_display = ["created_at", "order", "from_status", "to_status", "actor", "reason"]
    list_filter = ["to_status"]
    list_select_related = ["order"]
    search_fields = ["order__reference", "actor"]
    ordering = ["-created_at", "-pk"]

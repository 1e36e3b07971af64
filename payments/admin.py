from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.translation import pgettext, pgettext_lazy
from django.views.decorators.http import require_POST

from core.admin_base import ReadOnlyAdmin, ReadOnlyInline, ReasonForm, details_asked, reason_asked
from core.roles import ROLE_TITLES
from payments.amount_text import (
    credit_units_text,
    due_text,
    movement_units_text,
    payment_units_text,
    refund_units_text,
    with_asset,
)
from payments.models import (
    Asset,
    Credit,
    Network,
    Notice,
    Outflow,
    PaymentEvent,
    PaymentRequest,
    Rate,
    Refund,
    RefundEvent,
    Sweep,
    UnexpectedOutflow,
)
from payments.networks import rpc_env_name, rpc_urls, single_provider_warning
from payments.refunds import RefundDecisionError, refund_decide, refund_goodwill_open, refund_goodwill_refusal
from payments.review import (
    Decision,
    ReviewError,
    decisions_offered,
    payment_evidence,
    payment_review_decide,
    payments_in_review,
)

# ModelAdmin and TabularInline are generic in the stubs only (subscripting them when the code runs fails).
if TYPE_CHECKING:
    _AssetInlineBase = admin.TabularInline[Asset, Network]
    _NetworkAdminBase = admin.ModelAdmin[Network]
    _RateAdminBase = admin.ModelAdmin[Rate]
    _PaymentRequestAdminBase = admin.ModelAdmin[PaymentRequest]
    _RefundAdminBase = admin.ModelAdmin[Refund]
    _OutflowAdminBase = admin.ModelAdmin[Outflow]
else:
    _AssetInlineBase = admin.TabularInline
    _NetworkAdminBase = _RateAdminBase = _PaymentRequestAdminBase = _RefundAdminBase = _OutflowAdminBase = (
        admin.ModelAdmin
    )


class AssetInline(_AssetInlineBase):
    model = Asset
    extra = 0
    fields = [
        "symbol",
        "name",
        "decimals",
        "contract",
        "usd_stable",
        "price_feed",
        "price_feed_heartbeat_seconds",
        "enabled",
    ]


@admin.register(Network)
class NetworkAdmin(_NetworkAdminBase):
    list_display = ["name", "slug", "chain_id", "confirmations_required", "enabled", "verifier"]
    list_editable = ["enabled"]
    readonly_fields = ["rpc_ok", "rpc_checked_at", "rpc_error", "rpc_errors", "head_block", "scan_lease_until"]
    inlines = [AssetInline]

    @admin.display(description=pgettext_lazy("staff", "verifier (offered at checkout?)"))
    def verifier(self, network: Network) -> str:
        if not rpc_urls(network):
            return f"not offered: set {rpc_env_name(network.slug)}"
        warning = single_provider_warning(network)
        return f"{self._verifier_state(network)}; {warning}" if warning else self._verifier_state(network)

    @staticmethod
    def _verifier_state(network: Network) -> str:
        if network.rpc_ok is False:
            return f"DOWN, not offered: {network.rpc_error}"
        if network.rpc_ok is None:
            return "not checked yet"
        if network.rpc_error:  # up, but the last pass ended early (rate limits): the next one goes on
            return f"up at block {network.head_block}, offered; last pass: {network.rpc_error}"
        return f"ok at block {network.head_block}"


@admin.register(Rate)
class RateAdmin(_RateAdminBase):
    list_display = ["asset", "usd_per_unit", "as_of", "source"]
    list_filter = ["asset"]


class CreditInline(ReadOnlyInline):
    model = Credit
    fields = (
        "transaction",
        "network",
        "asset",
        "token_contract",
        "kind",
        "after_settlement",
        "amount",
        "sender",
        "block_number",
        "block_hash",
        "block_timestamp",
        "confirmations",
        "final",
        "removed_at",
        "removed_reason",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Credit]:
        # Each row shows its network (explorer link) and asset (named after its network): one join, not 3 per row.
        return super().get_queryset(request).select_related("network", "asset__network")

    @admin.display(description=pgettext_lazy("staff", "amount"))
    def amount(self, credit: Credit) -> str:
        return credit_units_text(credit)

    @admin.display(description=pgettext_lazy("staff", "transaction (explorer)"))
    def transaction(self, credit: Credit) -> str:
        template = credit.network.explorer_tx_url
        label = f"{credit.tx_hash}:{credit.log_index}"
        if not template:
            return label
        return format_html('<a href="{}" rel="noopener noreferrer">{}</a>', template.format(tx=credit.tx_hash), label)


class NoticeInline(ReadOnlyInline):
    model = Notice
    fields = ("created_at", "tx_hash", "language", "checked_at", "result")
    readonly_fields = fields


class PaymentEventInline(ReadOnlyInline):
    model = PaymentEvent
    fields = ("created_at", "from_status", "to_status", "actor", "reason")
    readonly_fields = fields


class NeedsReviewFilter(admin.SimpleListFilter):
    """The reviewer's list: payments whose order or extension waits for a decision."""

    title = pgettext_lazy("staff", "needs review")
    parameter_name = "review"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("waiting", pgettext("staff", "Waiting for a reviewer"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[PaymentRequest]) -> QuerySet[PaymentRequest]:
        if self.value() == "waiting":
            return queryset.filter(pk__in=payments_in_review().values("pk"))
        return queryset


# Base-unit columns, shown in units with the asset's symbol instead.
UNITS_SHOWN = {
    "amount_base_units": "amount_asked",
    "received_base_units": "amount_counted",
    "opening_balance_base_units": "opening_balance",
    "refunds_due": "refunds_due_shown",
}


@admin.register(PaymentRequest)
class PaymentRequestAdmin(_PaymentRequestAdminBase):
    list_display = [
        "order",
        "status",
        "asset",
        "amount_asked",
        "received",
        "confirmations",
        "refunds",
        "expires_at",
    ]
    list_filter = [NeedsReviewFilter, "status", "asset__network"]
    search_fields = ["order__reference", "address", "credits__tx_hash"]
    list_select_related = ["order", "asset__network"]
    show_full_result_count = False  # one count of the filtered rows, not a second of every payment ever made
    inlines = [CreditInline, NoticeInline, PaymentEventInline]
    actions = ["accept", "reject", "mark_for_refund", "goodwill_refund"]
    exclude = ["key_fingerprint"]
    change_form_template = "admin/payments/paymentrequest/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[PaymentRequest]:
        # Each row's "received" is read from its credits (late money too): one query for all of them.
        credits = Credit.objects.on_chain().select_related("network", "asset")
        return super().get_queryset(request).prefetch_related(Prefetch("credits", queryset=credits, to_attr="shown"))

    def get_fields(self, request: HttpRequest, obj: PaymentRequest | None = None) -> list[str]:  # type: ignore[override]
        return [
            UNITS_SHOWN.get(field.name, field.name)
            for field in PaymentRequest._meta.fields
            if field.name not in ("id", "key_fingerprint")
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: PaymentRequest | None = None) -> list[str]:
        return self.get_fields(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: PaymentRequest | None = None) -> bool:
        return False

    @admin.display(description=pgettext_lazy("staff", "amount"))
    def amount_asked(self, payment: PaymentRequest) -> str:
        return payment_units_text(payment, payment.amount_base_units)

    @admin.display(description=pgettext_lazy("staff", "received (counted toward the order)"))
    def amount_counted(self, payment: PaymentRequest) -> str:
        return payment_units_text(payment, payment.received_base_units)

    @admin.display(description=pgettext_lazy("staff", "received (in its asset, late money too)"))
    def received(self, payment: PaymentRequest) -> str:
        return payment_evidence(payment, getattr(payment, "shown", None)).received

    @admin.display(description=pgettext_lazy("staff", "opening balance (not the customer's)"))
    def opening_balance(self, payment: PaymentRequest) -> str:
        if payment.opening_balance_base_units is None:
            return "-"
        return payment_units_text(payment, payment.opening_balance_base_units)

    @admin.display(description=pgettext_lazy("staff", "refunds due"))
    def refunds_due_shown(self, payment: PaymentRequest) -> str:
        return due_text(payment.refunds_due) if payment.refunds_due else "-"

    @admin.display(description=pgettext_lazy("staff", "refunds due"))
    def refunds(self, payment: PaymentRequest) -> str:
        return due_text(payment.refunds_due) if payment.refunds_due else "-"

    def has_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("payments.review_payment")

    def get_urls(self) -> list[URLPattern]:
        decide = path(
            "<path:object_id>/decide/",
            self.admin_site.admin_view(self.decide_view),
            name="payments_paymentrequest_decide",
        )
        return [decide, *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The payment's page: its evidence, and accept and reject beside it while a decision is awaited."""
        payment = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if payment is not None:
            context |= {
                "evidence": payment_evidence(payment),
                "decisions": decisions_offered(payment) if self.has_review_permission(request) else [],
                "may_review": self.has_review_permission(request),
                "decide_url": reverse("admin:payments_paymentrequest_decide", args=[payment.pk]),
                "reviewers": ROLE_TITLES["reviewer"],
            }
        return super().change_view(request, object_id, form_url, context)

    @method_decorator(require_POST)
    def decide_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The payment page's Accept and Reject buttons: a decision with its reason, then back to the page."""
        if not self.has_review_permission(request):
            raise PermissionDenied
        payment = get_object_or_404(PaymentRequest, pk=object_id)
        decision = request.POST.get("decision", "")
        if decision not in (Decision.ACCEPT, Decision.REJECT):
            return HttpResponseBadRequest("Unknown decision.")
        try:
            payment_review_decide(
                payment_id=payment.pk,
                decision=decision,
                reason=request.POST.get("reason", "")[:2000],
                reviewer=request.user.get_username(),
            )
        except ReviewError as exc:
            self.message_user(request, f"{payment.order}: {exc}", messages.ERROR)
        else:
            if decision == Decision.ACCEPT:
                done = pgettext("staff", "%(order)s: payment accepted: the order is paid")
            else:
                done = pgettext("staff", "%(order)s: payment rejected")
            self.message_user(request, done % {"order": payment.order}, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:payments_paymentrequest_change", args=[payment.pk]))

    def _decide(
        self, request: HttpRequest, queryset: QuerySet[PaymentRequest], decision: str, title: str
    ) -> HttpResponse | None:
        items = [
            f"{payment.order}: {payment.get_status_display()}, {payment_evidence(payment).text}" for payment in queryset
        ]
        reason, page = reason_asked(self, request, queryset, title=title, items=items)
        if reason is None:
            return page  # every decision needs a reason
        for payment in queryset:
            try:
                payment_review_decide(
                    payment_id=payment.pk,
                    decision=decision,
                    reason=reason,
                    reviewer=request.user.get_username(),
                )
            except ReviewError as exc:
                self.message_user(request, f"{payment.order}: {exc}", messages.WARNING)
            else:
                recorded = pgettext("staff", "%(order)s: %(decision)s recorded")
                self.message_user(request, recorded % {"order": payment.order, "decision": title.lower()})
        return None

    @admin.action(description=pgettext_lazy("staff", "Accept the payment (the order is paid)"), permissions=["review"])
    def accept(self, request: HttpRequest, queryset: QuerySet[PaymentRequest]) -> HttpResponse | None:
        return self._decide(request, queryset, Decision.ACCEPT, pgettext("staff", "Accept payment"))

    @admin.action(
        description=pgettext_lazy("staff", "Reject the payment (the order is cancelled, funds to refund)"),
        permissions=["review"],
    )
    def reject(self, request: HttpRequest, queryset: QuerySet[PaymentRequest]) -> HttpResponse | None:
        return self._decide(request, queryset, Decision.REJECT, pgettext("staff", "Reject payment"))

    @admin.action(description=pgettext_lazy("staff", "Mark for refund"), permissions=["review"])
    def mark_for_refund(self, request: HttpRequest, queryset: QuerySet[PaymentRequest]) -> HttpResponse | None:
        return self._decide(request, queryset, Decision.REFUND, pgettext("staff", "Mark for refund"))

    @admin.action(
        description=pgettext_lazy("staff", "Open a goodwill refund (in the payment's asset)"), permissions=["review"]
    )
    def goodwill_refund(self, request: HttpRequest, queryset: QuerySet[PaymentRequest]) -> HttpResponse | None:
        items = [f"{payment.order}: {payment.asset}" for payment in queryset]
        form_class = type("GoodwillFormFor", (GoodwillForm,), {"payments": list(queryset)})
        title = pgettext("staff", "Goodwill refund")
        answers, page = details_asked(self, request, queryset, title=title, items=items, form_class=form_class)
        if answers is None:
            return page
        for payment in queryset:
            units = answers["amount"].scaleb(payment.decimals)
            if units != units.to_integral_value():
                warning = pgettext("staff", "%(order)s: more decimals than %(symbol)s has") % {
                    "order": payment.order,
                    "symbol": payment.asset.symbol,
                }
                self.message_user(request, warning, messages.WARNING)
                continue
            try:
                refund = refund_goodwill_open(
                    payment_id=payment.pk,
                    amount_base_units=int(units),
                    reviewer=request.user.get_username(),
                    reason=answers["reason"],
                )
            except ValueError as exc:  # more than the address has left to give
                self.message_user(request, f"{payment.order}: {exc}", messages.WARNING)
                continue
            opened = pgettext("staff", "%(order)s: goodwill refund %(refund)s opened")
            self.message_user(request, opened % {"order": payment.order, "refund": refund.pk})
        return None


class GoodwillForm(forms.Form):
    amount = forms.DecimalField(
        min_value=Decimal("0.000000000000000001"),
        label=pgettext_lazy("staff", "Amount"),
        help_text=pgettext_lazy("staff", "in whole units of the asset"),
    )
    reason = forms.CharField(widget=forms.Textarea, max_length=2000, label=pgettext_lazy("staff", "Reason"))
    payments: list[PaymentRequest] = []

    def clean_amount(self) -> Decimal:
        """More than a selected payment can still give back is an error on the field, before anything opens
        (refund_goodwill_open checks again under the payment's lock)."""
        amount: Decimal = self.cleaned_data["amount"]
        for payment in self.payments:
            units = amount.scaleb(payment.decimals)
            refusal = units == units.to_integral_value() and refund_goodwill_refusal(
                payment=payment, amount_base_units=int(units)
            )
            if refusal:
                raise forms.ValidationError(f"{payment.order}: {refusal}")
        return amount


def approval_form(refunds: QuerySet[Refund]) -> type[forms.Form]:
    """The reason, and each refund's address as the confirmation page shows it, in a hidden field."""
    shown = {
        f"to_address_{refund.pk}": forms.CharField(widget=forms.HiddenInput, initial=refund.to_address, required=False)
        for refund in refunds
    }
    return type("RefundApprovalForm", (ReasonForm,), shown)


class RefundEventInline(ReadOnlyInline):
    model = RefundEvent
    fields = ["created_at", "from_status", "to_status", "actor", "reason"]


@admin.register(Refund)
class RefundAdmin(_RefundAdminBase):
    """Refunds are opened by the money (or by a reviewer's goodwill action on a payment) and move only through
    payments.refunds; here reviewers approve or reject them, with a reason."""

    list_display = ["pk", "order", "reason", "amount", "network", "to_address", "status", "tx_hash"]
    list_filter = ["status", "reason", "network"]
    search_fields = ["payment__order__reference", "to_address", "tx_hash"]
    list_select_related = ["payment__order", "network"]
    show_full_result_count = False
    inlines = [RefundEventInline]
    actions = ["approve", "reject"]

    def get_fields(self, request: HttpRequest, obj: Refund | None = None) -> list[str]:  # type: ignore[override]
        return [
            "amount" if field.name == "amount_base_units" else field.name
            for field in Refund._meta.fields
            if field.name != "id"
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Refund | None = None) -> list[str]:
        return self.get_fields(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Refund | None = None) -> bool:
        return False

    def has_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("payments.review_payment")

    @admin.display(description=pgettext_lazy("staff", "order"))
    def order(self, refund: Refund) -> str:
        return refund.payment.order.reference

    @admin.display(description=pgettext_lazy("staff", "amount"))
    def amount(self, refund: Refund) -> str:
        return refund_units_text(refund)

    def _decide(
        self, request: HttpRequest, queryset: QuerySet[Refund], *, approve: bool, title: str
    ) -> HttpResponse | None:
        to = pgettext("staff", "%(order)s: %(amount)s to %(address)s")
        items = [
            to % {"order": r.payment.order.reference, "amount": refund_units_text(r), "address": r.to_address or "-"}
            for r in queryset
        ]
        # An approval carries, per refund, the address this page showed: one changed since is not approved.
        form_class = approval_form(queryset) if approve else ReasonForm
        answers, page = details_asked(self, request, queryset, title=title, items=items, form_class=form_class)
        if answers is None:
            return page
        for refund in queryset:
            try:
                seen = answers.get(f"to_address_{refund.pk}", "") if approve else None
                refund_decide(
                    refund_id=refund.pk,
                    approve=approve,
                    reviewer=request.user.get_username(),
                    reason=answers["reason"],
                    to_address=seen,
                )
            except RefundDecisionError as exc:
                refused = pgettext("staff", "refund %(refund)s: %(error)s")
                self.message_user(request, refused % {"refund": refund.pk, "error": exc}, messages.WARNING)
            else:
                recorded = pgettext("staff", "refund %(refund)s: %(decision)s recorded")
                self.message_user(request, recorded % {"refund": refund.pk, "decision": title.lower()})
        return None

    @admin.action(
        description=pgettext_lazy("staff", "Approve the refund (the treasurer's next run pays it)"),
        permissions=["review"],
    )
    def approve(self, request: HttpRequest, queryset: QuerySet[Refund]) -> HttpResponse | None:
        return self._decide(request, queryset, approve=True, title=pgettext("staff", "Approve refund"))

    @admin.action(description=pgettext_lazy("staff", "Reject the refund"), permissions=["review"])
    def reject(self, request: HttpRequest, queryset: QuerySet[Refund]) -> HttpResponse | None:
        return self._decide(request, queryset, approve=False, title=pgettext("staff", "Reject refund"))


class OutflowAdmin(_OutflowAdminBase):
    """What the scan saw leave deposit addresses (payments/outflows.py): evidence, read only."""

    list_select_related = ["payment__order", "payment__asset", "network"]
    show_full_result_count = False
    search_fields = ["payment__order__reference", "payment__address", "to_address", "tx_hash"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return with_asset(super().get_queryset(request))  # each row's token, for its amount in units

    def get_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:  # type: ignore[override]
        return [
            "amount" if field.name == "amount_base_units" else field.name
            for field in self.model._meta.fields
            if field.name != "id"
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:
        return self.get_fields(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.display(description=pgettext_lazy("staff", "amount"))
    def amount(self, row: Any) -> str:
        return movement_units_text(row)


@admin.register(Sweep)
class SweepAdmin(OutflowAdmin):
    list_display = ["pk", "payment", "network", "token_contract", "amount", "tx_hash", "final", "removed_at"]
    list_filter = ["network", "final"]


@admin.register(UnexpectedOutflow)
class UnexpectedOutflowAdmin(OutflowAdmin):
    list_display = [
        "pk",
        "payment",
        "network",
        "token_contract",
        "amount",
        "to_address",
        "tx_hash",
        "acknowledged_at",
    ]
    list_filter = ["network", "acknowledged_at"]


# Read-only lists of the evidence, for looking one up across orders (issue 30): each row's relations in the same
# query, newest first by default, searchable by order reference and transaction.


@admin.register(Credit)
class CreditAdmin(ReadOnlyAdmin):
    list_display = [
        "tx_hash",
        "log_index",
        "order",
        "network",
        "kind",
        "amount",
        "final",
        "removed_at",
        "block_timestamp",
    ]
    list_filter = ["network", "kind", "final"]
    list_select_related = ["payment__order", "network", "asset__network"]
    search_fields = ["tx_hash", "payment__order__reference", "sender", "payment__address"]
    ordering = ["-block_timestamp", "-pk"]

    @admin.display(description=pgettext_lazy("staff", "order"))
    def order(self, credit: Credit) -> str:
        return credit.payment.order.reference

    @admin.display(description=pgettext_lazy("staff", "amount"))
    def amount(self, credit: Credit) -> str:
        return credit_units_text(credit)


@admin.register(PaymentEvent)
class PaymentEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "order", "from_status", "to_status", "actor", "reason"]
    list_filter = ["to_status"]
    list_select_related = ["payment__order"]
    search_fields = ["payment__order__reference", "actor"]
    ordering = ["-created_at", "-pk"]

    @admin.display(description=pgettext_lazy("staff", "order"))
    def order(self, event: PaymentEvent) -> str:
        return event.payment.order.reference


@admin.register(RefundEvent)
class RefundEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "refund", "from_status", "to_status", "actor", "reason"]
    list_filter = ["to_status"]
    list_select_related = ["refund__payment__order"]
    search_fields = ["refund__payment__order__reference", "actor"]
    ordering = ["-created_at", "-pk"]

"""Server-rendered pages: home with the advice, the four-step order wizard, the order's status page.

The wizard keeps its answers in the session; nothing is stored or reserved until "Place order".
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import segno
from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.cache import patch_vary_headers
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from core.conditional import etag_matches, not_modified, validator_set
from core.input_errors import OrderInputError
from core.page_cache import page_kept, page_key
from orders.credit_lines import credit_summary
from orders.extensions import extension_refusal
from orders.key_change import KeyChangeRefused, key_change_unapplied, key_replace, key_replaceable
from orders.link_rotation import order_link_rotate
from orders.models import HypothesisKind, Order, OrderStatus, order_total_usd
from orders.order_links import order_key_form_path, order_status_path
from orders.orders import order_for_token
from payments.checkout import order_first_payment
from payments.models import Network, Notice, PaymentStatus, Refund
from payments.networks import finality_description
from payments.notices import payment_notice_submit
from payments.refunds import refund_address_give
from provisioning.manifest import manifest_document, public_key_b64
from shop.catalog import Catalog, catalog_current, catalog_data
from shop.extension_placement import ExtensionAwaitingPayment, ExtensionRefused, ExtensionRequest, extension_create
from shop.forms import ConfigureForm, ContactForm, ExtendForm, KeyReplaceForm, PaidForm, PaymentForm
from shop.order_input import MAX_LOTS_PER_ORDER, OrderInputErrors, build_order_request
from shop.order_story import (
    key_was_refused,
    order_story,
    order_timeline,
    payable,
    refund_owed,
    refund_waiting_for_address,
)
from shop.order_version import OrderVersion, order_read, order_version_read
from shop.order_view import order_representation
from shop.order_waits import minutes_left, minutes_to_preparation
from shop.placement import order_create
from shop.receipt import order_receipt, receipt_available, receipt_language

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

WIZARD_KEY = "order_wizard"
STATUS_REFRESH_SECONDS = 15
STEPS = ["configure", "contact", "payment", "review"]
# Which step a field belongs to, to send the customer back to the right place.
FIELD_STEPS = {
    "lots": "configure",
    "duration_days": "configure",
    "preparation": "configure",
    "first_name": "contact",
    "last_name": "contact",
    "email": "contact",
    "ssh_public_key": "contact",
    "hypothesis_kind": "contact",
    "hypothesis": "contact",
    "network": "payment",
    "asset": "payment",
    "payment_option": "payment",
}


# Home and the catalog page for a new visitor show nothing of the visitor's but the CSRF token of the language
# form (and the wizard's): kept whole, per language, catalog version and count of free lots.
CATALOG_PAGE_SECONDS = 60


def _kept_for_everyone(request: HttpRequest) -> bool:
    """A plain visit: no query string (a link's prefill, a tracker's tags) and no one-time message."""
    return not request.GET and not len(messages.get_messages(request))


def home(request: HttpRequest) -> HttpResponse:
    catalog = catalog_current()
    if not _kept_for_everyone(request):
        return render(request, "shop/home.html", {"catalog": catalog})
    return page_kept(
        request,
        key=page_key("home", get_language(), catalog.version, catalog.lots_available),
        seconds=CATALOG_PAGE_SECONDS,
        render=lambda holes: render(request, "shop/home.html", {"catalog": catalog, **holes}),
    )


def _wizard(request: HttpRequest) -> dict[str, Any]:
    wizard: dict[str, Any] = request.session.get(WIZARD_KEY, {})
    return wizard


def _save_wizard(request: HttpRequest, data: dict[str, Any]) -> None:
    wizard = _wizard(request)
    merged = {**wizard, **data}
    if merged != wizard or WIZARD_KEY not in request.session:  # an unchanged wizard is not written again
        request.session[WIZARD_KEY] = merged


def _first_missing_step(wizard: dict[str, Any]) -> str | None:
    if "lots" not in wizard:
        return "configure"
    if "email" not in wizard:
        return "contact"
    if "network" not in wizard:
        return "payment"
    return None


def order_summary(wizard: dict[str, Any]) -> dict[str, Any] | None:
    """The live summary: cards = 2 x lots, memory per card, price, time window."""
    catalog = catalog_data()
    lot = catalog.lot
    duration = next((d for d in catalog.durations if d.days == wizard.get("duration_days")), None)
    lots = wizard.get("lots")
    if duration is None or not isinstance(lots, int) or not 1 <= lots <= MAX_LOTS_PER_ORDER:
        return None
    preparation = next((p for p in catalog.preparations if p.slug == wizard.get("preparation")), None)
    return {
        "lot": lot,
        "lots": lots,
        "total_gpus": lots * lot.gpus_per_lot,
        "duration": duration,
        "preparation": preparation,
        "price_per_lot_usd": duration.price_per_lot_usd,
        "total_usd": order_total_usd(lots=lots, price_per_lot_usd=duration.price_per_lot_usd),
        "gpu_hours": lots * lot.gpus_per_lot * duration.days * 24,
    }


def _step_context(request: HttpRequest, step: str, form: forms.Form | None, **extra: object) -> dict[str, Any]:
    wizard = _wizard(request)
    return {
        "form": form,
        "step": step,
        "steps": STEPS,
        "step_number": STEPS.index(step) + 1,
        "summary": order_summary(wizard),
        "wizard": wizard,
        **extra,
    }


@require_http_methods(["GET", "POST"])
def order_configure(request: HttpRequest) -> HttpResponse:
    catalog = catalog_current()
    wizard = _wizard(request)
    if request.method == "POST":
        form = ConfigureForm(request.POST, durations=catalog.durations, preparations=catalog.preparations)
        if form.is_valid():
            _save_wizard(request, form.cleaned_data)
            if "refresh" in request.POST:  # "Update summary" without JavaScript
                return redirect("shop:order_configure")
            return redirect("shop:order_contact")
        return render(request, "shop/order_configure.html", _step_context(request, "configure", form, catalog=catalog))
    if not wizard and _kept_for_everyone(request):  # a new visitor's first step: the same page for everyone
        return page_kept(
            request,
            key=page_key("configure", get_language(), catalog.version, catalog.lots_available),
            seconds=CATALOG_PAGE_SECONDS,
            render=lambda holes: _configure_page(request, catalog, wizard, holes),
        )
    return _configure_page(request, catalog, wizard, {})


def _configure_page(
    request: HttpRequest, catalog: Catalog, wizard: dict[str, Any], holes: dict[str, str]
) -> HttpResponse:
    initial = {
        "lots": _initial_lots(request, wizard),
        "duration_days": wizard.get("duration_days", catalog.durations[0].days if catalog.durations else None),
        "preparation": wizard.get("preparation", catalog.preparations[0].slug if catalog.preparations else None),
    }
    form = ConfigureForm(initial=initial, durations=catalog.durations, preparations=catalog.preparations)
    if "lots" in request.GET:  # a link's prefill is kept; a plain visit stores nothing (no session row)
        _save_wizard(request, {"lots": initial["lots"]})
    # The summary shows what the form shows, stored or not.
    shown = {**wizard, **{key: value for key, value in initial.items() if value is not None}}
    context = _step_context(request, "configure", form, catalog=catalog, summary=order_summary(shown))
    return render(request, "shop/order_configure.html", {**context, **holes})


def _initial_lots(request: HttpRequest, wizard: dict[str, Any]) -> int:
    """`?lots=N` prefills (the fit advisor links here); otherwise what was chosen before, or 1.

    Clamped to what one order may hold: a huge N used to reach the price summary and crash it (a 500).
    """
    try:
        return min(MAX_LOTS_PER_ORDER, max(1, int(request.GET["lots"])))
    except (KeyError, ValueError):
        lots: int = wizard.get("lots", 1)
        return lots


@require_http_methods(["GET", "POST"])
def order_contact(request: HttpRequest) -> HttpResponse:
    wizard = _wizard(request)
    if "lots" not in wizard:
        return redirect("shop:order_configure")
    if request.method == "POST":
        form = ContactForm(request.POST)
        if form.is_valid():
            _save_wizard(request, {k: v for k, v in form.cleaned_data.items() if k != "terms"})
            return redirect("shop:order_payment")
    else:
        form = ContactForm(initial=wizard)
    return render(request, "shop/order_contact.html", _step_context(request, "contact", form))


@require_http_methods(["GET", "POST"])
def order_payment(request: HttpRequest) -> HttpResponse:
    wizard = _wizard(request)
    missing = _first_missing_step(wizard)
    if missing in ("configure", "contact"):
        return redirect(f"shop:order_{missing}")
    networks = catalog_data().networks
    if request.method == "POST":
        form = PaymentForm(request.POST, networks=networks)
        if form.is_valid():
            network, _sep, symbol = form.cleaned_data["payment_option"].partition(":")
            _save_wizard(request, {"network": network, "asset": symbol})
            return redirect("shop:order_review")
    else:
        current = f"{wizard['network']}:{wizard['asset']}" if "network" in wizard else None
        form = PaymentForm(initial={"payment_option": current}, networks=networks)
    for network in networks:  # the catalog's own copies: how long a transfer takes to count there
        network.finality_text = finality_description(network)
    return render(request, "shop/order_payment.html", _step_context(request, "payment", form, networks=networks))


@require_http_methods(["GET", "POST"])
def order_review(request: HttpRequest) -> HttpResponse:
    wizard = _wizard(request)
    missing = _first_missing_step(wizard)
    if missing:
        return redirect(f"shop:order_{missing}")
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        try:
            placed = order_create(request=build_order_request(wizard, language=get_language()))
        except OrderInputErrors as exc:
            errors = exc.errors
        except OrderInputError as exc:
            errors = {exc.field: [exc.message]}
        else:
            request.session.pop(WIZARD_KEY, None)
            return redirect(order_status_path(placed.order))
    error_steps = sorted({FIELD_STEPS.get(field, "configure") for field in errors}, key=STEPS.index)
    context = _step_context(
        request, "review", None, errors=errors, error_steps=error_steps, hypothesis_label=_hypothesis_label(wizard)
    )
    context["payment_network"] = _payment_network(wizard)
    return render(request, "shop/order_review.html", context, status=400 if errors else 200)


def _hypothesis_label(wizard: dict[str, Any]) -> StrOrPromise:
    kind = wizard.get("hypothesis_kind")
    return HypothesisKind(kind).label if kind in HypothesisKind.values else ""


def _payment_network(wizard: dict[str, Any]) -> Network | None:
    """The chosen network as the catalog offers it: the review names it as customers know it ("Base"), not by
    its slug. None once it is no longer offered (placing the order then says so)."""
    return next((network for network in catalog_data().networks if network.slug == wizard.get("network")), None)


def _order_or_404(reference: str, token: str) -> Order:
    order = order_for_token(reference=reference, token=token)
    if order is None:
        raise Http404
    return order


@lru_cache(maxsize=512)
def payment_qr_svg(uri: str) -> str:
    """The payment link as an inline SVG QR code. A payment's link never changes, and encoding it cost more
    than the rest of the page (about 10 ms), which refreshes itself while the payment is watched: computed once."""
    return segno.make(uri, error="m").svg_inline(scale=4, dark="#111", light="#fff")


def _status_page(
    request: HttpRequest,
    order: Order,
    token: str,
    *,
    paid_form: PaidForm | None = None,
    extend_form: ExtendForm | None = None,
    key_form: KeyReplaceForm | None = None,
    refund_error: tuple[int, str, str] | None = None,
    status: int = 200,
    version: OrderVersion | None = None,
    holes: dict[str, str] | None = None,
) -> HttpResponse:
    version = version or order_version_read(reference=order.reference, token=token)
    assert version is not None, "the token opened the order: its version reads"  # as before: no page without it
    view = order_representation(order, token=token, request=request, version=version)
    qr_svg = payment_qr_svg(view["payment"]["uri"])
    open_extensions = [e for e in view["extensions"] if e["status"] in ("awaiting_payment", "payment_reported")]
    now = timezone.now()
    for extension in open_extensions:
        extension["qr_svg"] = payment_qr_svg(extension["payment"]["uri"])
        extension["payable"] = payable(extension["status"], extension["payment"], now)
    context = {
        "order": order,
        "view": view,
        "payment": view["payment"],
        "qr_svg": qr_svg,
        "status_url": view["status_url"],
        "total_usd": Decimal(view["total_usd"]),
        "paid_form": paid_form or PaidForm(),
        # What the page's script follows of the extensions (issue 40): each one's status and its payment's, so that
        # a change it did not render (an extension paid, applied, expired) brings the page up to date by itself.
        "extension_states": json.dumps({e["id"]: [e["status"], e["payment"]["status"]] for e in view["extensions"]}),
        # The "Extend" form, while the rental runs (shown again with its errors after a refused POST).
        # Not while an extension waits for its payment: one open quote at a time.
        "extend_form": extend_form or (_extend_form(order) if _extendable(order) and not open_extensions else None),
        # "Replace SSH key", in the states that allow it (shown again with its error after a refused POST)
        "key_form": key_form or (KeyReplaceForm() if key_replaceable(order.status) else None),
        # (a change waits on the nodes only while the rental runs: before, it is applied as it is made)
        "key_unapplied": key_change_unapplied(order) if order.status == OrderStatus.ACTIVE else None,
        # Time given back for downtime or adjusted by staff, with the downtime total and its cap
        "credits": credit_summary(order) if order.status in (OrderStatus.ACTIVE, OrderStatus.ENDED) else None,
        # (refund id, the address given, what is wrong with it): shown on that refund's field
        "refund_error": refund_error,
        "receipt_path": reverse("shop:order_receipt", kwargs={"reference": order.reference, "token": token})
        if receipt_available(order)
        else None,
        "refresh_seconds": STATUS_REFRESH_SECONDS
        if view["payment"]["watching"] or order.status == OrderStatus.PREPARING
        else None,
        "server_now": now.isoformat(),  # the countdown's clock; a kept page has a hole here
        **_story_context(order, view, now),
        **(holes or {}),
    }
    return render(request, "shop/order_status.html", context, status=status)


def _story_context(order: Order, view: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """The story the page leads with, the payment card or not, and the timeline (shop/order_story.py)."""
    payment = view["payment"]
    first_notice_at = None
    if payment["notices"] and payment["status"] == PaymentStatus.PENDING:
        first_notice_at = (
            Notice.objects.filter(payment_id=order.payment.pk)
            .order_by("created_at")
            .values_list("created_at", flat=True)
            .first()
        )
    runs = view["preparation_progress"]
    story = order_story(
        order.status, payment, view["refunds"], now=now, first_notice_at=first_notice_at,
        key_refused=key_was_refused(runs),
    )  # fmt: skip
    percent = round(sum(r["progress"] for r in runs) / len(runs)) if runs else None
    return {
        "story": story,
        "payable": payable(order.status, payment, now),
        "timeline": order_timeline(order.status, payment["status"]),
        # An expired or cancelled order's address must not invite a transfer any more.
        "show_address": order.status not in (OrderStatus.EXPIRED, OrderStatus.CANCELLED),
        "refund_to_address": refund_waiting_for_address(view["refunds"]),
        "refund_owed": refund_owed(view["refunds"]),
        "new_order_url": reverse("shop:order_configure") + f"?lots={order.lots}",
        "finality_minutes": max(1, round(payment["finality_wait_seconds"] / 60)),
        "preparation_percent": percent,
        # How long it usually takes from here (shop/order_waits.py): none while too few orders were measured
        "auto_prepare": settings.AUTO_PREPARE,
        "paid_wait_minutes": minutes_to_preparation(now) if order.status == OrderStatus.PAID else None,
        "preparation_left_minutes": minutes_left(percent, now) if order.status == OrderStatus.PREPARING else None,
    }


# A page is the same for a minute at most, whatever else: what depends on the time (whether the rental can
# still be extended) is at most this late, on a kept page as on one a browser keeps.
PAGE_VERSION_SECONDS = 60


@require_safe
def order_status(request: HttpRequest, reference: str, token: str) -> HttpResponse:
    """The secret link: the order and its payment request. A wrong token is a plain 404.

    Conditional: a browser that reloads the page (its no-script refresh, a reload) while nothing changed gets
    a 304 for one query and no rendering; another visit while nothing changed is served from the kept page."""
    version = order_version_read(reference=reference, token=token)
    if version is None:
        raise Http404
    if len(messages.get_messages(request)):  # a one-time message: rendered for this visit alone, never kept
        return _status_page(request, order_read(version), token, version=version)
    now = timezone.now()
    language, minute = get_language(), str(int(now.timestamp()) // PAGE_VERSION_SECONDS)
    catalog, ended = _catalog_shown(version), str(version.deadlines_passed(now))

    def etag() -> str:
        # The browser's copy holds forms whose tokens come from its CSRF secret: the same secret, the same copy
        # (the one this request came with, or the one its answer sets).
        return version.etag("page", language, minute, catalog, ended, request.META.get("CSRF_COOKIE", ""))

    if etag_matches(request, etag()):
        return not_modified(etag())
    key = page_key(
        "order", version.etag("page", language, minute, catalog, ended), request.get_host(), request.get_full_path()
    )
    response = page_kept(
        request,
        key=key,
        seconds=PAGE_VERSION_SECONDS,
        render=lambda holes: _status_page(request, order_read(version), token, version=version, holes=holes),
    )
    return validator_set(response, etag())


@require_POST
def order_paid(request: HttpRequest, reference: str, token: str) -> HttpResponse:
    """ "I have paid": record the notice and check now. Repeating it is harmless."""
    order = _order_or_404(reference, token)
    form = PaidForm(request.POST)
    if form.is_valid():
        try:
            payment_notice_submit(order=order, tx_hash=form.cleaned_data["tx_hash"], language=get_language())
        except OrderInputError as exc:
            form.add_error("tx_hash", exc.message)
        else:
            messages.success(request, _("Thank you: we are checking the chain now. This page updates by itself."))
            return redirect(order_status_path(order))
    return _status_page(request, order, token, paid_form=form, status=400)


def _catalog_shown(version: OrderVersion) -> str:
    """The catalog's version when the page shows its prices (a running rental's Extend form), else "": a price
    staff change gives the page a new version at once, and the pages of other orders keep theirs."""
    return catalog_data().version if version.status == OrderStatus.ACTIVE else ""


def _extendable(order: Order) -> bool:
    return order.status == OrderStatus.ACTIVE and not extension_refusal(order=order, now=timezone.now())


def _extend_form(order: Order, data: QueryDict | None = None) -> ExtendForm:
    catalog = catalog_data()
    first = order_first_payment(order).asset
    initial = {"duration_days": order.duration_days, "payment_option": f"{first.network.slug}:{first.symbol}"}
    return ExtendForm(data, initial=initial, durations=catalog.durations, networks=catalog.networks)


@require_POST
def order_extend(request: HttpRequest, reference: str, token: str) -> HttpResponse:
    """The order page's "Extend" form: an extension with its own payment request, shown on the same page."""
    order = _order_or_404(reference, token)
    form = _extend_form(order, request.POST)
    if form.is_valid():
        network, _sep, symbol = form.cleaned_data["payment_option"].partition(":")
        asked = ExtensionRequest(duration_days=form.cleaned_data["duration_days"], network=network, asset=symbol)
        try:
            extension = extension_create(order=order, request=asked)
        except ExtensionAwaitingPayment as exc:  # the form stays, with the extension to pay named on it
            form.add_error(None, str(exc))
            return _status_page(request, order, token, extend_form=form, status=409)
        except ExtensionRefused as exc:
            messages.error(request, str(exc))
            return redirect(order_status_path(order))
        except OrderInputError as exc:
            form.add_error("payment_option" if exc.field in ("asset", "network") else "duration_days", exc.message)
        else:
            messages.success(request, _("Your extension is open: pay it below, as you paid the order."))
            return redirect(order_status_path(order) + f"#extension-{extension.pk}")
    return _status_page(request, order, token, extend_form=form, status=400)


@require_POST
def order_ssh_key(request: HttpRequest, reference: str, token: str) -> HttpResponse:
    """The order page's "Replace SSH key" form (orders/key_change.py decides what the state allows)."""
    order = _order_or_404(reference, token)
    form = KeyReplaceForm(request.POST)
    if form.is_valid():
        try:
            change = key_replace(order_id=order.pk, text=form.cleaned_data["ssh_public_key"])
        except KeyChangeRefused as exc:
            messages.error(request, str(exc))
            return redirect(order_key_form_path(order))
        except OrderInputError as exc:
            form.add_error("ssh_public_key", exc.message)
        else:
            if change.applied_at is not None:
                messages.success(request, _("Your new SSH key is saved: access will use it."))
            else:
                messages.success(
                    request, _("Your new SSH key is being installed on your node; the page says when it is done.")
                )
            return redirect(order_key_form_path(order))
    form.forget_private_key()
    return _status_page(request, order, token, key_form=form, status=400)


@require_POST
def order_new_link(request: HttpRequest, reference: str, token: str) -> HttpResponse:
    """The order page's "Make a new private link": this page's address stops working; the new one is emailed."""
    order = _order_or_404(reference, token)
    order_link_rotate(order_id=order.pk)
    order.refresh_from_db(fields=["access_nonce"])
    messages.success(
        request,
        _("This is your order's new private link; the previous one no longer works. It is on its way to your email."),
    )
    return redirect(order_status_path(order))


@require_POST
def refund_address(request: HttpRequest, reference: str, token: str, refund_id: int) -> HttpResponse:
    """The order page's refund form; a refused address is shown again with the reason on its field."""
    order = _order_or_404(reference, token)
    address = request.POST.get("address", "")[:200]
    try:
        refund_address_give(order_id=order.pk, refund_id=refund_id, address=address)
    except Refund.DoesNotExist:
        raise Http404 from None
    except OrderInputError as exc:
        return _status_page(request, order, token, refund_error=(refund_id, address, exc.message), status=400)
    messages.success(request, _("Thank you: a reviewer approves the refund, then it is sent to that address."))
    return redirect(order_status_path(order) + f"#refund-{refund_id}")


def order_receipt_page(request: HttpRequest, reference: str, token: str) -> HttpResponse:
    """The printable receipt, in the language the customer chose (the order's where the request names none:
    shop.receipt.receipt_language). Before the order is paid, a page saying so: a 200, not a 404, which the rate
    limit would count as a guessed token (core/ratelimit.py)."""
    order = _order_or_404(reference, token)
    status_path = order_status_path(order)
    language = receipt_language(request, order)
    with translation.override(language):
        if not receipt_available(order):
            response = render(request, "shop/receipt_none.html", {"order": order, "status_path": status_path})
        else:
            context = {"order": order, "receipt": order_receipt(order), "status_path": status_path}
            response = render(request, "shop/receipt.html", context)
    response["Content-Language"] = language
    patch_vary_headers(response, ("Cookie", "Accept-Language"))
    return response


def order_manifest(request: HttpRequest, reference: str, token: str) -> JsonResponse:
    """The signed manifest, for the customer to keep and verify offline (see /manifest-key.pub)."""
    order = _order_or_404(reference, token)
    manifest = getattr(order, "manifest", None)
    if manifest is None:
        raise Http404
    response = JsonResponse(manifest_document(manifest), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="manifest-{order.reference}.json"'
    return response


def manifest_public_key(request: HttpRequest) -> HttpResponse:
    """The shop's Ed25519 public key (base64, raw 32 bytes) that signs every manifest."""
    return HttpResponse(public_key_b64() + "\n", content_type="text/plain")

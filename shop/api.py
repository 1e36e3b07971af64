"""The REST API under /api/v1/: the catalog, placing an order, and reading it with its token."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponseBase
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import LIMITED, LIMITED_BODY_READ, NOT_FOUND, ApiView, documented
from core.api_fields import EmailTextField, SlugTextField, TextField
from core.conditional import etag_matches, not_modified, validator_set
from core.input_errors import OrderInputError
from core.page_cache import page_key
from orders.key_change import KeyChangeRefused, key_replace
from orders.link_rotation import order_link_rotate
from orders.models import Duration, HypothesisKind, LotSpec, Preparation
from orders.order_links import order_status_path
from orders.sshkeys import MAX_KEY_CHARS
from payments.checkout import order_first_payment
from payments.models import Asset, Network
from payments.notices import payment_notice_submit
from shop.catalog import Catalog, catalog_current
from shop.extension_placement import ExtensionAwaitingPayment, ExtensionRefused, ExtensionRequest, extension_create
from shop.order_api_base import TOKEN_HEADER, TokenOrderApi
from shop.order_input import (
    MAX_LOTS_PER_ORDER,
    OrderInputErrors,
    build_order_request,
    check_lots,
    parse_key,
    resolve_asset,
    resolve_duration,
    resolve_network,
    resolve_preparation,
)
from shop.order_version import OrderVersion, order_read, order_version_read
from shop.order_view import extension_representation, order_representation
from shop.placement import order_create


class CatalogOutput(serializers.Serializer[Catalog]):
    class Lot(serializers.Serializer[LotSpec]):
        gpus_per_lot = serializers.IntegerField()
        gpu_model = serializers.CharField()
        gpu_memory_gb = serializers.IntegerField()
        memory_type = serializers.CharField()

    class DurationOut(serializers.Serializer[Duration]):
        days = serializers.IntegerField()
        price_per_lot_usd = serializers.DecimalField(max_digits=12, decimal_places=2)
        purpose = serializers.CharField()

    class PreparationOut(serializers.Serializer[Preparation]):
        slug = serializers.SlugField()
        name = serializers.CharField()
        description = serializers.CharField()

    class NetworkOut(serializers.Serializer[Network]):
        class AssetOut(serializers.Serializer[Asset]):
            symbol = serializers.CharField()
            name = serializers.CharField()
            decimals = serializers.IntegerField()
            contract = serializers.CharField(allow_null=True)

        slug = serializers.SlugField()
        name = serializers.CharField()
        chain_id = serializers.IntegerField()
        finality = serializers.CharField(source="finality_rule", help_text="blocks:N, safe or finalized")
        finality_wait_seconds = serializers.IntegerField(help_text="About how long until a transfer is final")
        confirmations_required = serializers.IntegerField()
        assets = AssetOut(many=True, source="offered_assets")

    lot = Lot()
    durations = DurationOut(many=True)
    preparations = PreparationOut(many=True)
    networks = NetworkOut(many=True)
    lots_available = serializers.IntegerField()


Checked = TypeVar("Checked")
Resolved = TypeVar("Resolved")

CATALOG_BODY_SECONDS = 600  # keyed by the catalog's version: a changed catalog is a new key


class CatalogApi(APIView):
    @extend_schema(responses=CatalogOutput, summary="What can be ordered now")
    def get(self, request: Request) -> Response:
        # The serialized catalog is kept per language and catalog version; only the count of free lots is new.
        catalog = catalog_current()
        key = f"shop:catalog-body:{get_language()}:{catalog.version}"
        body = cache.get(key)
        if body is None:
            body = dict(CatalogOutput(catalog).data)
            cache.set(key, body, CATALOG_BODY_SECONDS)
        return Response({**body, "lots_available": catalog.lots_available})


def _field_check(check: Callable[[Checked], Resolved], value: Checked) -> Resolved:
    """The check's result, or its OrderInputError as the serializer field's error."""
    try:
        return check(value)
    except OrderInputError as exc:
        raise serializers.ValidationError(exc.message) from None


class OrderInput(serializers.Serializer[Mapping[str, object]]):
    """Types and sizes here; the business checks (capacity, catalog, key, asset) in shop.order_input."""

    lots = serializers.IntegerField(min_value=1, max_value=MAX_LOTS_PER_ORDER)
    duration_days = serializers.IntegerField(min_value=1, max_value=366)
    preparation = SlugTextField(max_length=50)
    first_name = TextField(max_length=100)
    last_name = TextField(max_length=150)
    email = EmailTextField(max_length=254)
    ssh_public_key = TextField(max_length=MAX_KEY_CHARS, trim_whitespace=True)
    network = SlugTextField(max_length=50)
    asset = TextField(max_length=12)
    hypothesis_kind = serializers.ChoiceField(choices=HypothesisKind.choices, required=False, allow_blank=True)
    hypothesis = TextField(max_length=2000, required=False, allow_blank=True)
    language = serializers.ChoiceField(choices=settings.LANGUAGES, required=False)
    expected_total_usd = serializers.DecimalField(
        max_digits=14, decimal_places=2, min_value=Decimal(0), required=False,
        help_text="The total in USD you expect to pay: a different price now answers 409 `price_changed` with it",
    )  # fmt: skip

    # Single-field business checks, so that every bad field is reported in the same 400.
    def validate_lots(self, value: int) -> int:
        return _field_check(check_lots, value)

    def validate_duration_days(self, value: int) -> int:
        _field_check(resolve_duration, value)
        return value

    def validate_preparation(self, value: str) -> str:
        _field_check(resolve_preparation, value)
        return value

    def validate_ssh_public_key(self, value: str) -> str:
        _field_check(parse_key, value)
        return value

    def validate_network(self, value: str) -> str:
        _field_check(resolve_network, value)
        return value

    def validate_asset(self, value: str) -> str:
        try:
            resolve_asset(str(self.initial_data.get("network", "")), value)
        except OrderInputError as exc:
            if exc.field == "asset":  # a bad network is validate_network's to report
                raise serializers.ValidationError(exc.message) from None
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        language = attrs.get("language") or get_language() or "en"
        try:
            attrs["order_request"] = build_order_request(attrs, language=language)
        except OrderInputErrors as exc:
            raise serializers.ValidationError(exc.errors) from None
        return attrs


class RefundDueOutput(serializers.Serializer[Mapping[str, object]]):
    network = serializers.CharField()
    chain_id = serializers.IntegerField()
    asset = serializers.CharField(allow_null=True, help_text="Null: a token the shop does not sell")
    contract = serializers.CharField(allow_null=True, help_text="Null for the native coin")
    decimals = serializers.IntegerField(allow_null=True)
    base_units = serializers.CharField(help_text="Integer string in the asset's own base units")
    amount = serializers.CharField(allow_null=True, help_text="Decimal string in whole units, when decimals are known")


class PaymentOutput(serializers.Serializer[Mapping[str, object]]):
    network = serializers.CharField()
    chain_id = serializers.IntegerField()
    asset = serializers.CharField()
    contract = serializers.CharField(allow_null=True)
    address = serializers.CharField()
    amount = serializers.CharField(help_text="Decimal string in whole units")
    amount_base_units = serializers.CharField(help_text="Integer string in base units")
    expires_at = serializers.DateTimeField()
    uri = serializers.CharField(help_text="EIP-681 link")
    status = serializers.CharField()
    received_base_units = serializers.CharField()
    confirmations = serializers.IntegerField()
    confirmations_required = serializers.IntegerField(allow_null=True, help_text="N under blocks:N, else null")
    finality = serializers.CharField(help_text="The network's rule: blocks:N, safe or finalized")
    finality_wait_seconds = serializers.IntegerField()
    tx_hashes = serializers.ListField(child=serializers.CharField())
    refunds_due = RefundDueOutput(many=True, help_text="What is due back, one entry per asset it arrived in")


class RefundOutput(serializers.Serializer[Mapping[str, object]]):
    id = serializers.IntegerField()
    reason = serializers.CharField(help_text="overpaid, late, cancelled, wrong_asset or goodwill")
    asset = serializers.CharField(allow_null=True, help_text="Null: a token the shop does not sell")
    contract = serializers.CharField(allow_null=True, help_text="Null for the native coin")
    network = serializers.CharField()
    amount_base_units = serializers.CharField(help_text="Integer string in the asset's own base units")
    amount = serializers.CharField(allow_null=True, help_text="Decimal string in whole units, when decimals are known")
    to_address = serializers.CharField(allow_null=True, help_text="Null until the customer gives it")
    status = serializers.CharField(
        help_text="awaiting_address, pending_approval, approved, sent, confirmed or rejected"
    )
    tx_hash = serializers.CharField(allow_null=True)


class ExtensionOutput(serializers.Serializer[Mapping[str, object]]):
    id = serializers.IntegerField()
    duration_days = serializers.IntegerField()
    total_usd = serializers.CharField()
    status = serializers.CharField(help_text="awaiting_payment, payment_reported, needs_review, applied or expired")
    created_at = serializers.DateTimeField()
    applied_at = serializers.DateTimeField(allow_null=True)
    ends_at = serializers.DateTimeField(allow_null=True, help_text="The rental's end once this extension applied")
    payment = PaymentOutput()


class CreditOutput(serializers.Serializer[Mapping[str, object]]):
    kind = serializers.CharField(help_text="downtime (given back automatically) or staff (adjusted by staff)")
    seconds = serializers.IntegerField(help_text="Added to the rental's end; negative: removed")
    reason = serializers.CharField(help_text="Why, in the language asked for (staff adjustments: the staff's words)")
    created_at = serializers.DateTimeField()
    ends_at_after = serializers.DateTimeField(allow_null=True, help_text="The rental's end after this credit")


class NodeHealthOutput(serializers.Serializer[Mapping[str, object]]):
    node = serializers.CharField()
    state = serializers.CharField(help_text="in_use, or degraded while its health probe fails")
    healthy = serializers.BooleanField(allow_null=True, help_text="The latest probe's verdict; null: not probed yet")
    reachable = serializers.BooleanField(allow_null=True)
    checked_at = serializers.DateTimeField(allow_null=True, help_text="When the latest probe ran")
    problems = serializers.ListField(child=serializers.CharField(), help_text="What fails, in the probe's words")
    warnings = serializers.ListField(child=serializers.CharField(), help_text="Worth knowing, not a fault (disk space)")


class OrderOutput(serializers.Serializer[Mapping[str, object]]):
    reference = serializers.CharField()
    access_token = serializers.CharField()
    status_url = serializers.URLField()
    status = serializers.CharField()
    lots = serializers.IntegerField()
    total_gpus = serializers.IntegerField()
    gpu_model = serializers.CharField()
    gpu_memory_gb_per_card = serializers.IntegerField()
    duration_days = serializers.IntegerField()
    preparation = serializers.CharField()
    total_usd = serializers.CharField()
    hypothesis_kind = serializers.CharField()
    hypothesis = serializers.CharField()
    created_at = serializers.DateTimeField()
    payment = PaymentOutput()
    refunds = RefundOutput(many=True)
    extensions = ExtensionOutput(many=True)
    access = serializers.DictField(
        allow_null=True,
        help_text="host, port, user, host_key_fingerprint, ssh_command, ends_at, data_until (after the end: read-only "
        "SFTP until then), sftp_command, scp_command, alias, known_hosts_line and ssh_config (the node's pinned host "
        "key for ~/.ssh/known_hosts and a block for ~/.ssh/config: the first ssh asks nothing; null on a development "
        "node), nodes",
    )
    preparation_progress = serializers.ListField(child=serializers.DictField())
    manifest_url = serializers.URLField(allow_null=True)
    credits = CreditOutput(many=True, help_text="Time given back for downtime or adjusted by staff, oldest first")
    downtime_credit_cap_hours = serializers.IntegerField(help_text="Downtime given back per rental, at most")
    nodes_health = NodeHealthOutput(many=True, help_text="Each rented node's latest health probe (active orders)")


# Fields bound once: a serializer instance per request deep-copies every declared field (a third of a read).
# to_representation keeps no state between calls.
_ORDER_OUTPUT = OrderOutput()


class RefusedOutput(serializers.Serializer[Mapping[str, object]]):
    detail = serializers.CharField()
    code = serializers.CharField(help_text="Stable: `conflict`, `price_changed`, `extension_awaiting_payment`...")
    request_id = serializers.CharField(help_text="Also the X-Request-ID header: quote it to staff")
    total_usd = serializers.DecimalField(
        max_digits=14, decimal_places=2, required=False, help_text="With `price_changed`: the price now"
    )
    extension = ExtensionOutput(
        required=False, help_text="The extension that still awaits its payment, when that is why: pay it first"
    )


ORDER_EXAMPLE = OpenApiExample(
    "One lot for 7 days, ETH on the local development chain",
    request_only=True,
    value={
        "lots": 1,
        "duration_days": 7,
        "preparation": "pytorch-blackwell",
        "first_name": "Ada",
        "last_name": "Lovelace Byron",
        "email": "ada@example.org",
        "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOj0kj6LB97jYkrTq/cxyRbRW1ToiCv36/g1REti7FUb ada@lab",
        "network": "local",
        "asset": "ETH",
        "hypothesis_kind": "bigger_batch",
        "hypothesis": "A global batch of 2048 fits when sharded.",
    },
)


class OrderCreateApi(ApiView):
    @extend_schema(
        request=OrderInput,
        examples=[ORDER_EXAMPLE],
        responses=documented({201: OrderOutput, 409: RefusedOutput}, LIMITED_BODY_READ),
        summary="Place an order",
    )
    def post(self, request: Request) -> Response:
        data = OrderInput(data=request.data)
        data.is_valid(raise_exception=True)
        placed = order_create(request=data.validated_data["order_request"])
        version = OrderVersion.of_new_order(placed.order)
        body = order_representation(placed.order, token=placed.access_token, request=request, version=version)
        return Response(_ORDER_OUTPUT.to_representation(body), status=status.HTTP_201_CREATED)


class PaidInput(serializers.Serializer[Mapping[str, object]]):
    tx_hash = TextField(max_length=200, required=False, allow_blank=True)


class PaidOutput(serializers.Serializer[Mapping[str, object]]):
    reference = serializers.CharField()
    status = serializers.CharField()
    payment_status = serializers.CharField()
    detail = serializers.CharField()


IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="The ETag of the last answer: 304 with no body while nothing shown has changed",
)


ORDER_BODY_SECONDS = 60


def order_body_kept(*, version: OrderVersion, etag: str, token: str, request: Request) -> dict[str, Any]:
    """The order's body, kept under its ETag: a client that asks again without If-None-Match while nothing
    changed is answered from it. The key also names what the body echoes: the token and the site's address."""
    key = page_key("api-order", etag, request.build_absolute_uri("/"), token)
    body: dict[str, Any] | None = cache.get(key)
    if body is None:
        shown = order_representation(order_read(version), token=token, request=request, version=version)
        body = _ORDER_OUTPUT.to_representation(shown)
        cache.set(key, body, ORDER_BODY_SECONDS)
    return body


class OrderDetailApi(APIView):
    @extend_schema(
        parameters=[TOKEN_HEADER, IF_NONE_MATCH],
        responses=documented({200: OrderOutput, 304: None, 404: NOT_FOUND}, LIMITED),
        summary="Read an order with its token (conditional: ETag, If-None-Match)",
    )
    def get(self, request: Request, reference: str) -> Response:
        # Read, and the 304 answered, by order_detail before DRF's dispatch.
        version, etag = getattr(request._request, ORDER_VERSION_READ)
        if version is None:  # the token is checked first: a guessed ETag tells a stranger nothing
            raise Http404
        token = request.headers.get("X-Order-Token", "")  # the one that opened the version read
        return validator_set(Response(order_body_kept(version=version, etag=etag, token=token, request=request)), etag)


ORDER_VERSION_READ = "shop_order_version"
_order_detail_drf = OrderDetailApi.as_view()


@functools.wraps(_order_detail_drf)  # keeps the view's class for the schema and its CSRF exemption
def order_detail(request: HttpRequest, reference: str) -> HttpResponseBase:
    """The order's read with the 304 answered before DRF's dispatch (a third of an unchanged poll's cost): the
    version is read once and handed on; every other answer (200, the 404 of a wrong token) is DRF's."""
    version = order_version_read(reference=reference, token=request.headers.get("X-Order-Token"))
    etag = version.etag("api", get_language()) if version is not None else ""
    if version is not None and etag_matches(request, etag):
        return not_modified(etag)
    setattr(request, ORDER_VERSION_READ, (version, etag))
    return _order_detail_drf(request, reference=reference)


class OrderPaidApi(TokenOrderApi):
    @extend_schema(
        parameters=[TOKEN_HEADER],
        request=PaidInput,
        responses=documented({202: PaidOutput, 404: NOT_FOUND}, LIMITED_BODY_READ),
        summary='"I have paid"',
    )
    def post(self, request: Request, reference: str) -> Response:
        order = self.token_order(reference)
        data = PaidInput(data=request.data)
        data.is_valid(raise_exception=True)
        payment_notice_submit(order=order, tx_hash=data.validated_data.get("tx_hash", ""), language=get_language())
        order.refresh_from_db()
        body = {
            "reference": order.reference,
            "status": order.status,
            "payment_status": order_first_payment(order).status,
            "detail": _("Received: the payment is being checked on-chain."),
        }
        return Response(body, status=status.HTTP_202_ACCEPTED)


class ExtendInput(serializers.Serializer[Mapping[str, object]]):
    duration_days = serializers.IntegerField()
    network = SlugTextField(max_length=40, required=False, allow_blank=True)
    asset = TextField(max_length=12, required=False, allow_blank=True)
    expected_total_usd = serializers.DecimalField(
        max_digits=14, decimal_places=2, min_value=Decimal(0), required=False,
        help_text="The total in USD you expect to pay: a different price now answers 409 `price_changed` with it",
    )  # fmt: skip


class OrderExtendApi(TokenOrderApi):
    refusals = (ExtensionRefused,)

    @extend_schema(
        parameters=[TOKEN_HEADER],
        request=ExtendInput,
        responses=documented({201: ExtensionOutput, 404: NOT_FOUND, 409: RefusedOutput}, LIMITED_BODY_READ),
        summary="Extend an active rental by 3, 7 or 30 days",
    )
    def post(self, request: Request, reference: str) -> Response:
        order = self.token_order(reference)
        data = ExtendInput(data=request.data)
        data.is_valid(raise_exception=True)
        asked = ExtensionRequest(
            duration_days=data.validated_data["duration_days"],
            network=data.validated_data.get("network", ""),
            asset=data.validated_data.get("asset", ""),
            expected_total_usd=data.validated_data.get("expected_total_usd"),
        )
        try:
            extension = extension_create(order=order, request=asked)
        except ExtensionAwaitingPayment as exc:  # a refusal that also shows the extension to pay first
            waiting = extension_representation(exc.extension, notices=exc.extension.payment.notices.count())
            body: dict[str, object] = {"detail": str(exc), "code": "extension_awaiting_payment"}
            body["extension"] = ExtensionOutput(waiting).data
            return Response(body, status=status.HTTP_409_CONFLICT)
        body = extension_representation(extension, notices=0)
        return Response(ExtensionOutput(body).data, status=status.HTTP_201_CREATED)


class SshKeyInput(serializers.Serializer[Mapping[str, object]]):
    ssh_public_key = TextField(max_length=MAX_KEY_CHARS, trim_whitespace=True)


class SshKeyChangeOutput(serializers.Serializer[Mapping[str, object]]):
    id = serializers.IntegerField()
    old_fingerprint = serializers.CharField()
    new_fingerprint = serializers.CharField()
    created_at = serializers.DateTimeField()
    applied_at = serializers.DateTimeField(
        allow_null=True, help_text="Set once the order uses the key: at once before the preparation, once every "
        "node carries it while the rental runs"
    )  # fmt: skip
    detail = serializers.CharField()


class OrderSshKeyApi(TokenOrderApi):
    refusals = (KeyChangeRefused,)

    @extend_schema(
        parameters=[TOKEN_HEADER],
        request=SshKeyInput,
        responses=documented({202: SshKeyChangeOutput, 404: NOT_FOUND, 409: RefusedOutput}, LIMITED_BODY_READ),
        summary="Replace the order's SSH key (before the preparation, or while the rental runs)",
        examples=[
            OpenApiExample(
                "A new key",
                value={
                    "ssh_public_key": "ssh-ed25519 "
                    "AAAAC3NzaC1lZDI1NTE5AAAAIOj0kj6LB97jYkrTq/cxyRbRW1ToiCv36/g1REti7FUb ada@new"
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: Request, reference: str) -> Response:
        order = self.token_order(reference)
        data = SshKeyInput(data=request.data)
        data.is_valid(raise_exception=True)
        change = key_replace(order_id=order.pk, text=data.validated_data["ssh_public_key"])
        detail = (
            _("The new key is saved: access will use it.")
            if change.applied_at is not None
            else _("The new key is being installed on your node; the previous key works until it is.")
        )
        body = {
            "id": change.pk,
            "old_fingerprint": change.old_fingerprint,
            "new_fingerprint": change.new_fingerprint,
            "created_at": change.created_at,
            "applied_at": change.applied_at,
            "detail": detail,
        }
        return Response(SshKeyChangeOutput(body).data, status=status.HTTP_202_ACCEPTED)


class LinkRotatedOutput(serializers.Serializer[Mapping[str, object]]):
    reference = serializers.CharField()
    access_token = serializers.CharField(help_text="The order's new token: the previous one no longer opens it")
    status_url = serializers.CharField(help_text="The order's new private link (also emailed to the order's address)")
    detail = serializers.CharField()


class OrderLinkRotateApi(TokenOrderApi):
    @extend_schema(
        parameters=[TOKEN_HEADER],
        request=None,
        responses=documented({200: LinkRotatedOutput, 404: NOT_FOUND}, LIMITED),
        summary="Make the order's private link and token anew (the old ones stop working at once)",
    )
    def post(self, request: Request, reference: str) -> Response:
        order = self.token_order(reference)
        token = order_link_rotate(order_id=order.pk)
        order.refresh_from_db(fields=["access_nonce"])
        body = {
            "reference": order.reference,
            "access_token": token,
            "status_url": request.build_absolute_uri(order_status_path(order)),
            "detail": _("The previous link no longer opens the order. The new one is on its way to your email."),
        }
        return Response(LinkRotatedOutput(body).data)

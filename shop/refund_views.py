"""The customer's refund address in the API: `POST /api/v1/orders/<reference>/refunds/<id>/address/` (header
X-Order-Token); the order page's form is shop.views.refund_address."""

from __future__ import annotations

from collections.abc import Mapping

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import LIMITED_BODY_READ, NOT_FOUND, documented
from core.api_fields import TextField
from payments.models import Refund
from payments.refunds import refund_address_give
from shop.api import RefundOutput
from shop.order_api_base import TOKEN_HEADER, TokenOrderApi
from shop.order_view import refund_representation


class AddressInput(serializers.Serializer[Mapping[str, object]]):
    address = TextField(max_length=100)


class RefundAddressApi(TokenOrderApi):
    @extend_schema(
        parameters=[TOKEN_HEADER],
        request=AddressInput,
        responses=documented({200: RefundOutput, 404: NOT_FOUND}, LIMITED_BODY_READ),
        summary="Give the address a refund goes to (the order's token)",
    )
    def post(self, request: Request, reference: str, refund_id: str) -> Response:
        order = self.token_order(reference)
        if not refund_id.isdigit():
            raise Http404
        data = AddressInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            address = data.validated_data["address"]
            refund = refund_address_give(order_id=order.pk, refund_id=int(refund_id), address=address)
        except Refund.DoesNotExist:
            raise Http404 from None
        refund.refresh_from_db()
        return Response(refund_representation(refund))

"""The customer's refund address in the API: `POST /api/v1/orders/<reference>/refunds/<id>/address/` (header
X-Order-Token); the order page's form is shop.views.refund_address."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import BAD_INPUT, NOT_FOUND, RATE_LIMITED, TOO_LARGE, UNSUPPORTED_MEDIA_TYPE
from core.api_fields import TextField
from core.input_errors import OrderInputError
from orders.orders import order_for_token
from payments.models import Refund
from payments.refunds import refund_address_give
from shop.api import RefundOutput
from shop.order_view import refund_representation


class AddressInput(serializers.Serializer):
    address = TextField(max_length=100)


class RefundAddressApi(APIView):
    @extend_schema(
        request=AddressInput,
        responses={
            200: RefundOutput,
            400: BAD_INPUT,
            404: NOT_FOUND,
            413: TOO_LARGE,
            415: UNSUPPORTED_MEDIA_TYPE,
            429: RATE_LIMITED,
        },
        summary="Give the address a refund goes to (the order's token)",
    )
    def post(self, request: Request, reference: str, refund_id: str) -> Response:
        order = order_for_token(reference=reference, token=request.headers.get("X-Order-Token"))
        if order is None or not refund_id.isdigit():
            raise Http404
        data = AddressInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            address = data.validated_data["address"]
            refund = refund_address_give(order_id=order.pk, refund_id=int(refund_id), address=address)
        except Refund.DoesNotExist:
            raise Http404 from None
        except OrderInputError as exc:
            return Response({exc.field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
        refund.refresh_from_db()
        return Response(refund_representation(refund))

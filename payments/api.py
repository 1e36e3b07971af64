"""Payment reviewers' API: `POST /api/v1/refunds/<id>/approve/` and `.../reject/` (session or DRF token)."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api_errors import (
    BAD_INPUT,
    CONFLICT,
    NOT_ALLOWED,
    NOT_FOUND,
    RATE_LIMITED,
    TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
)
from config.api_fields import TextField
from payments.models import Refund
from payments.refunds import RefundDecisionError, refund_decide


class IsPaymentReviewer(permissions.BasePermission):
    def has_permission(self, request: Request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm("payments.review_payment"))


class DecisionInput(serializers.Serializer):
    reason = TextField(max_length=2000)


class DecisionOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()


class RefundDecisionApi(APIView):
    permission_classes = [IsPaymentReviewer]
    approve = True

    @extend_schema(
        request=DecisionInput,
        responses={
            200: DecisionOutput,
            400: BAD_INPUT,
            401: NOT_ALLOWED,
            403: NOT_ALLOWED,
            404: NOT_FOUND,
            409: CONFLICT,
            413: TOO_LARGE,
            415: UNSUPPORTED_MEDIA_TYPE,
            429: RATE_LIMITED,
        },
        summary="Approve or reject a refund (payment reviewers)",
    )
    def post(self, request: Request, refund_id: str) -> Response:
        if not refund_id.isdigit():
            raise Http404
        get_object_or_404(Refund, pk=int(refund_id))
        data = DecisionInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            refund = refund_decide(
                refund_id=int(refund_id),
                approve=self.approve,
                reviewer=request.user.get_username(),
                reason=data.validated_data["reason"],
            )
        except RefundDecisionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response({"id": refund.pk, "status": refund.status})

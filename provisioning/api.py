"""POST /api/v1/orders/<reference>/prepare/: operators only (session or DRF token)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api_errors import CONFLICT, NOT_ALLOWED, NOT_FOUND
from provisioning.prepare import PreparationError, preparation_start
from shop.models import Order


class IsOperator(permissions.BasePermission):
    def has_permission(self, request: Request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm("provisioning.prepare_order"))


class PrepareOutput(serializers.Serializer):
    reference = serializers.CharField()
    status = serializers.CharField()
    runs = serializers.ListField(child=serializers.DictField())


class OrderPrepareApi(APIView):
    permission_classes = [IsOperator]

    @extend_schema(
        request=None,
        responses={202: PrepareOutput, 401: NOT_ALLOWED, 403: NOT_ALLOWED, 404: NOT_FOUND, 409: CONFLICT},
        summary="Start an order's preparation (operators)",
    )
    def post(self, request: Request, reference: str) -> Response:
        order = get_object_or_404(Order, reference=reference.upper())
        try:
            runs = preparation_start(order_id=order.pk, actor=request.user.get_username())
        except PreparationError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        order.refresh_from_db()
        body = {
            "reference": order.reference,
            "status": order.status,
            "runs": [{"id": run.pk, "node": run.node.name, "status": run.status} for run in runs],
        }
        return Response(body, status=status.HTTP_202_ACCEPTED)

"""Payment reviewers' API: `POST /api/v1/refunds/<id>/approve/` (with the `to_address` the reviewer saw) and
`.../reject/` (session or DRF token)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import (
    BAD_INPUT,
    CONFLICT,
    LIMITED_BODY_READ,
    NOT_FOUND,
    STAFF_ONLY,
    UNAVAILABLE,
    ApiView,
    documented,
)
from core.api_fields import TextField
from payments.ledger import KINDS as LEDGER_KINDS
from payments.ledger import LEDGER_DEFAULT_DAYS, ledger_csv_lines, ledger_movements
from payments.models import Network, Refund
from payments.refunds import RefundDecisionError, refund_decide
from payments.rpc import RpcError
from payments.treasury import treasury_plan


class HasPermission(permissions.BasePermission):
    """Staff whose role grants `required` (any of them)."""

    required: tuple[str, ...] = ()

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and any(user.has_perm(p) for p in self.required))


class IsPaymentReviewer(HasPermission):
    required = ("payments.review_payment",)


class IsTreasurer(HasPermission):
    required = ("payments.plan_treasury",)


class SeesLedger(HasPermission):
    required = ("payments.view_ledger",)


class DecisionInput(serializers.Serializer[Mapping[str, object]]):
    reason = TextField(max_length=2000)


class ApprovalInput(DecisionInput):
    to_address = TextField(max_length=42, help_text="The refund's address as the reviewer saw it: 409 if it changed.")


class DecisionOutput(serializers.Serializer[Mapping[str, object]]):
    id = serializers.IntegerField()
    status = serializers.CharField()


DECISION_RESPONSES = documented({200: DecisionOutput, 404: NOT_FOUND, 409: CONFLICT}, STAFF_ONLY, LIMITED_BODY_READ)


class RefundRejectApi(ApiView):
    permission_classes = [IsPaymentReviewer]
    refusals = (RefundDecisionError,)  # its status, or an address changed since the reviewer saw it
    approve = False
    input_class: type[DecisionInput] = DecisionInput

    @extend_schema(request=DecisionInput, responses=DECISION_RESPONSES, summary="Reject a refund (payment reviewers)")
    def post(self, request: Request, refund_id: str) -> Response:
        if not refund_id.isdigit():
            raise Http404
        get_object_or_404(Refund, pk=int(refund_id))
        data = self.input_class(data=request.data)
        data.is_valid(raise_exception=True)
        refund = refund_decide(
            refund_id=int(refund_id),
            approve=self.approve,
            reviewer=request.user.get_username(),
            reason=data.validated_data["reason"],
            to_address=data.validated_data.get("to_address"),
        )
        return Response({"id": refund.pk, "status": refund.status})


class RefundApproveApi(RefundRejectApi):
    approve = True
    input_class = ApprovalInput

    @extend_schema(
        request=ApprovalInput,
        responses=DECISION_RESPONSES,
        summary="Approve a refund, naming the address seen; 409 if it changed since (payment reviewers)",
    )
    def post(self, request: Request, refund_id: str) -> Response:
        return super().post(request, refund_id)


class TreasuryPlanApi(APIView):
    permission_classes = [IsTreasurer]

    @extend_schema(
        parameters=[OpenApiParameter("network", str, required=True, description="The network's slug")],
        responses=documented({200: OpenApiTypes.OBJECT, 400: BAD_INPUT, 503: UNAVAILABLE}, STAFF_ONLY),
        summary="The treasury plan of a network: refunds to pay and sweeps, for the signer (treasurers)",
    )
    def get(self, request: Request) -> Response:
        network = Network.objects.filter(slug=str(request.query_params.get("network", ""))[:40]).first()
        if network is None:
            return Response({"network": ["No network with this slug."]}, status=status.HTTP_400_BAD_REQUEST)
        try:
            return Response(treasury_plan(network=network).to_json())
        except RpcError as exc:
            return Response({"detail": f"The network's RPC did not answer: {exc}"}, status=503)


class LedgerCsvApi(APIView):
    permission_classes = [SeesLedger]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "from",
                OpenApiTypes.DATE,
                description=f"First day (UTC), YYYY-MM-DD; without from and to, the last {LEDGER_DEFAULT_DAYS} days",
            ),  # fmt: skip
            OpenApiParameter("to", OpenApiTypes.DATE, description="Last day (UTC), YYYY-MM-DD"),
            OpenApiParameter("kind", OpenApiTypes.STR, enum=list(LEDGER_KINDS), description="One kind of movement"),
            OpenApiParameter("network", OpenApiTypes.STR, description="One network's slug"),
        ],
        responses=documented({(200, "text/csv"): OpenApiTypes.STR, 400: BAD_INPUT}, STAFF_ONLY),
        summary="Every on-chain movement as CSV (treasurers and payment reviewers)",
    )
    def get(self, request: Request) -> StreamingHttpResponse | Response:
        days, errors = {}, {}
        for name in ("from", "to"):
            raw = str(request.query_params.get(name, ""))[:20]
            try:
                days[name] = dt.date.fromisoformat(raw) if raw else None
            except ValueError:
                errors[name] = ["A day is written YYYY-MM-DD."]
        kind, network = str(request.query_params.get("kind", "")), str(request.query_params.get("network", ""))
        if kind and kind not in LEDGER_KINDS:
            errors["kind"] = [f"One of: {', '.join(LEDGER_KINDS)}."]
        if errors:
            return Response(errors, status=status.HTTP_400_BAD_REQUEST)
        if days["from"] is None and days["to"] is None:  # a range by default: the books only grow
            days["from"] = timezone.now().date() - dt.timedelta(days=LEDGER_DEFAULT_DAYS - 1)
        rows = ledger_movements(start=days["from"], end=days["to"], kind=kind, network=network[:40])
        # Streamed: each line leaves as it is read, however many movements the range holds
        response = StreamingHttpResponse(ledger_csv_lines(rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="ledger.csv"'
        return response

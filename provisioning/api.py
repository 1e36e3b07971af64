"""POST /api/v1/orders/<reference>/prepare/, POST /api/v1/nodes/<name>/recheck/ and POST
/api/v1/nodes/<name>/move/: operators only (session or DRF token)."""

from __future__ import annotations

from collections.abc import Mapping

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import BODY_READ, CONFLICT, NOT_FOUND, STAFF_ONLY, ApiView, documented
from fleet.models import Node
from orders.models import Order
from provisioning.models import NodeCheck, NodeMove
from provisioning.moves import MoveRefused, move_for_node
from provisioning.node_checks import RecheckRefused, UnknownPreparation, recheck_start
from provisioning.prepare import PreparationError, preparation_start


class IsOperator(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm("provisioning.prepare_order"))


class PrepareOutput(serializers.Serializer[Mapping[str, object]]):
    reference = serializers.CharField()
    status = serializers.CharField()
    runs = serializers.ListField(child=serializers.DictField())


class OperatorApi(ApiView):
    permission_classes = [IsOperator]


class OrderPrepareApi(OperatorApi):
    refusals = (PreparationError,)

    @extend_schema(
        request=None,
        responses=documented({202: PrepareOutput, 404: NOT_FOUND, 409: CONFLICT}, STAFF_ONLY),
        summary="Start an order's preparation (operators)",
    )
    def post(self, request: Request, reference: str) -> Response:
        order = get_object_or_404(Order, reference=reference.upper())
        runs = preparation_start(order_id=order.pk, actor=request.user.get_username())
        order.refresh_from_db()
        body = {
            "reference": order.reference,
            "status": order.status,
            "runs": [{"id": run.pk, "node": run.node.name, "status": run.status} for run in runs],
        }
        return Response(body, status=status.HTTP_202_ACCEPTED)


class RecheckInput(serializers.Serializer[Mapping[str, object]]):
    preparation = serializers.SlugField(
        required=False,
        max_length=50,
        help_text="The preparation whose setup step and preflight profile run (default: two-card-distributed).",
    )


class NodeCheckOutput(serializers.Serializer[Mapping[str, object]]):
    id = serializers.IntegerField()
    node = serializers.CharField()
    kind = serializers.CharField()
    requested_by = serializers.CharField()
    preparation = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    passed = serializers.BooleanField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)


def node_check_body(check: NodeCheck) -> dict[str, object]:
    return {
        "id": check.pk,
        "node": check.node.name,
        "kind": check.kind,
        "requested_by": check.requested_by,
        "preparation": check.preparation.slug if check.preparation else None,
        "created_at": check.created_at,
        "finished_at": check.finished_at,
        "passed": check.passed,
        "reason": check.reason,
    }


class NodeRecheckApi(OperatorApi):
    field_errors = {UnknownPreparation: "preparation"}
    refusals = (RecheckRefused,)

    @extend_schema(
        request=RecheckInput,
        responses=documented({202: NodeCheckOutput, 404: NOT_FOUND, 409: CONFLICT}, STAFF_ONLY, BODY_READ),
        summary="Recheck a failed or maintenance node: the preflight without an order (operators)",
    )
    def post(self, request: Request, name: str) -> Response:
        node = get_object_or_404(Node, name=name)
        given = RecheckInput(data=request.data)
        given.is_valid(raise_exception=True)
        preparation = given.validated_data.get("preparation", "")
        check = recheck_start(node=node, actor=request.user.get_username(), preparation=preparation)
        check.refresh_from_db()
        return Response(NodeCheckOutput(node_check_body(check)).data, status=status.HTTP_202_ACCEPTED)


class NodeMoveOutput(serializers.Serializer[Mapping[str, object]]):
    id = serializers.IntegerField()
    order = serializers.CharField()
    from_node = serializers.CharField()
    to_node = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    error = serializers.CharField(allow_blank=True)


def node_move_body(move: NodeMove) -> dict[str, object]:
    return {
        "id": move.pk,
        "order": move.order.reference,
        "from_node": move.from_node.name,
        "to_node": move.to_node.name if move.to_node else None,
        "status": move.status,
        "requested_by": move.requested_by,
        "created_at": move.created_at,
        "error": move.error,
    }


class NodeMoveApi(OperatorApi):
    refusals = (MoveRefused,)

    @extend_schema(
        request=None,
        responses=documented({202: NodeMoveOutput, 404: NOT_FOUND, 409: CONFLICT}, STAFF_ONLY),
        summary="Move the rental on a degraded or failed node to a spare node (operators)",
    )
    def post(self, request: Request, name: str) -> Response:
        node = get_object_or_404(Node, name=name)
        move = move_for_node(node=node, actor=request.user.get_username())
        move = NodeMove.objects.select_related("order", "from_node", "to_node").get(pk=move.pk)
        return Response(NodeMoveOutput(node_move_body(move)).data, status=status.HTTP_202_ACCEPTED)

"""`manage.py node_move NAME`: move the rental on a degraded or failed node to a spare node."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.models import Node
from provisioning.moves import MoveRefused, move_for_node


class Command(BaseCommand):
    help = (
        "Move the rental on a degraded or failed node to a spare node: a worker prepares a free node with the "
        "order's preparation and preflight, copies the tenant's home and scratch files, hands the new access over "
        "and then ends the rental on the old node (its progress shows in /ops/)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the degraded or failed node's name")
        parser.add_argument("--actor", default="manage.py", help="who asks (recorded on the move)")
        parser.add_argument("--reason", default="", help="why (recorded on the move)")

    def handle(self, *args: Any, name: str, actor: str, reason: str, **options: Any) -> None:
        node = Node.objects.filter(name=name).first()
        if node is None:
            raise CommandError(f"no node {name!r}")
        try:
            move = move_for_node(node=node, actor=actor, reason=reason)
        except MoveRefused as exc:
            raise CommandError(str(exc)) from None
        target = f" to {move.to_node.name}" if move.to_node else ""
        status = move.get_status_display()
        self.stdout.write(f"move {move.pk} of {move.order.reference} from {node.name}{target}: {status}")

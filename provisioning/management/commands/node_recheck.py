"""`manage.py node_recheck NAME [--preparation SLUG]`: recheck a failed or maintenance node."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.models import Node
from provisioning.node_checks import RECHECK_PREPARATION, RecheckRefused, recheck_start


class Command(BaseCommand):
    help = (
        "Recheck a failed or maintenance node: a worker runs the preflight on it without an order (no account, no "
        "tenant key); a pass returns it to available, a failure leaves it failed with the reason (see /ops/)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the node's name")
        parser.add_argument(
            "--preparation",
            default="",
            help=f"the preparation whose setup step and preflight profile run (default {RECHECK_PREPARATION})",
        )
        parser.add_argument("--actor", default="manage.py", help="who asks (recorded on the check and the node)")

    def handle(self, *args: Any, name: str, preparation: str, actor: str, **options: Any) -> None:
        node = Node.objects.filter(name=name).first()
        if node is None:
            raise CommandError(f"no node {name!r}")
        try:
            check = recheck_start(node=node, actor=actor, preparation=preparation)
        except RecheckRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"recheck {check.pk} of {node.name} stored; a worker runs it (its outcome shows in /ops/)")

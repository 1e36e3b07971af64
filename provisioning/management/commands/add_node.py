"""`manage.py add_node NAME --driver {local,ssh} [--host H] [--port P] [--user U] [--host-key KEY]
[--access-tool PATH] [--scratch DIR ...]`."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.models import Node, NodeDriver


class Command(BaseCommand):
    help = "Register a GPU node (one node = one lot of two cards), or update the one with that name."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--driver", choices=NodeDriver.values, required=True)
        parser.add_argument("--host", default="")
        parser.add_argument("--port", type=int, default=22)
        parser.add_argument("--user", default="")
        parser.add_argument("--host-key", default="", help="The node's SSH host public key, pinned")
        parser.add_argument("--gpu-model", default="NVIDIA B200")
        parser.add_argument("--gpu-count", type=int, default=2)
        parser.add_argument("--python", default="python3", help="The Python that runs the preflight")
        parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a development node")
        parser.add_argument(
            "--accounts-root", default="", help="a sandboxed user database (DIR/etc, DIR/home) instead of real accounts"
        )
        parser.add_argument(
            "--access-tool",
            default="",
            help="a login that is not root: the access tool installed at this path runs with `sudo -n` "
            "(docs/production.md)",
        )
        parser.add_argument(
            "--scratch",
            action="append",
            default=[],
            metavar="DIR",
            help="a scratch folder of the node, swept for the tenant's files at the end of each rental (repeatable)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["driver"] == NodeDriver.SSH and not (options["host"] and options["user"]):
            raise CommandError("an ssh node needs --host and --user")
        if options["access_tool"] and not options["access_tool"].startswith("/"):
            raise CommandError("--access-tool must be an absolute path on the node (the path in its sudo rule)")
        if options["driver"] == NodeDriver.SSH and options["user"] != "root" and not options["access_tool"]:
            self.stderr.write(
                f"warning: {options['user']} is not root: give --access-tool PATH "
                "(the sudo rule of docs/production.md), "
                "or the grant step will fail"
            )
        if not 1 <= options["port"] <= 65535:
            raise CommandError("--port must be between 1 and 65535")
        values = {
            "driver": options["driver"],
            "host": options["host"] or ("127.0.0.1" if options["driver"] == NodeDriver.LOCAL else ""),
            "port": options["port"],
            "user": options["user"],
            "host_key": options["host_key"],
            "gpu_model": options["gpu_model"],
            "gpu_count": options["gpu_count"],
            "python": options["python"],
            "preflight_device": options["device"],
            "accounts_root": options["accounts_root"],
            "access_tool": options["access_tool"],
            "scratch_paths": "\n".join(options["scratch"]),
        }
        node = Node.objects.filter(name=options["name"]).first() or Node(name=options["name"])
        for field, value in values.items():
            setattr(node, field, value)
        try:
            node.full_clean()
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        created = node.pk is None
        # An existing node keeps its state: only node_transition changes it (a preparation may be moving it now).
        node.save(update_fields=None if created else list(values))
        verb = "registered" if created else "updated"
        self.stdout.write(f"node {node.name} {verb} ({node.driver}, {node.host}:{node.port})")

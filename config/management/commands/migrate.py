"""`migrate`, which first renames the order domain's recorded migrations to its new label (core/app_labels.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.commands import migrate
from django.db import connections
from django.db.migrations.loader import MigrationLoader

from core.app_labels import recorded_migrations_relabelled


class Command(migrate.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        on_disk = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
        renamed = recorded_migrations_relabelled(connection, [name for app, name in on_disk if app == "orders"])
        if renamed and options["verbosity"] >= 1:
            self.stdout.write(f"Renamed {renamed} recorded migrations of the order domain from 'shop' to 'orders'.")
        super().handle(*args, **options)

"""Django app labels that changed, and what follows each change so that no data moves.

A label names an app's recorded migrations (`django_migrations.app`), its content types and so its permissions
("label.codename"). The order domain's label was "shop" and the nodes were provisioning's models; both now carry
their package's name (orders, fleet), and their tables keep their old names (each model's `db_table`).

- `recorded_migrations_relabelled` renames the order domain's recorded migrations before `migrate` plans
  (config/management/commands/migrate.py): Django plans from those rows, and would otherwise see its history as
  unapplied.
- `content_types_relabelled` is the data migration that moves content types, and with them every permission a
  group or user holds, to the new label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.db import migrations
from django.db.backends.base.base import BaseDatabaseWrapper

ORDERS_FIRST_LABEL = "shop"  # the order domain's label until the storefront took it


def recorded_migrations_relabelled(connection: BaseDatabaseWrapper, names: Iterable[str]) -> int:
    """Rename the order domain's recorded migrations `names` from "shop" to "orders", once: only while no
    migration is recorded under "orders" yet (afterwards "shop" is the storefront's). The number renamed."""
    if "django_migrations" not in connection.introspection.table_names():
        return 0  # a new database: nothing recorded
    names = sorted(names)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM django_migrations WHERE app = 'orders' LIMIT 1")
        if cursor.fetchone() or not names:
            return 0
        cursor.execute(
            "UPDATE django_migrations SET app = 'orders' WHERE app = %s AND name = ANY(%s)",
            [ORDERS_FIRST_LABEL, names],
        )
        return int(cursor.rowcount)


def content_types_relabelled(old: str, new: str, models: Iterable[str]) -> migrations.RunPython:
    """A RunPython that gives the content types of `models` (lower-case names) the label `new` instead of `old`:
    their ids, so every permission held through them, stay. A row already made under `new` (the models were
    seen before this ran) gives way to the old one, which groups and users hold."""
    models = sorted(models)

    def relabel(src: str, dst: str) -> Callable[[Any, Any], None]:
        def run(apps: Any, schema_editor: Any) -> None:
            content_type = apps.get_model("contenttypes", "ContentType")
            rows = content_type.objects.using(schema_editor.connection.alias)
            for model in models:
                if rows.filter(app_label=src, model=model).exists():
                    rows.filter(app_label=dst, model=model).delete()
                    rows.filter(app_label=src, model=model).update(app_label=dst)

        return run

    return migrations.RunPython(relabel(old, new), relabel(new, old), elidable=False)

"""The PostgreSQL side of the tallies: a migration of the app that owns a table adds its trigger with
`tally_kept(...)`, and /metrics reads the tally (`tallied`) instead of counting rows.

Two kinds. A gauge follows a column: +1 for the value a row arrives with, -1 for the one it leaves (an update
of the column, a delete). A counter counts arrivals at one of some values (or every insert, with no column) and
never goes down: a deleted row leaves its count, as a Prometheus counter must.

Each change adds to one row of the tally table in the writer's own transaction: the count is exact (a rollback
takes it back) and two writers of the same label queue on that row only until the first commits.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

FUNCTIONS = """
CREATE OR REPLACE FUNCTION tally_add(tally_name text, tally_label text, delta bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tallies_tally (name, label, n) VALUES (tally_name, tally_label, delta)
    ON CONFLICT (name, label) DO UPDATE SET n = tallies_tally.n + EXCLUDED.n;
END $$;

-- TG_ARGV: the tally's name, the column.
CREATE OR REPLACE FUNCTION tally_gauge() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    left_value text;
    new_value text;
BEGIN
    IF TG_OP <> 'INSERT' THEN left_value := to_jsonb(OLD) ->> TG_ARGV[1]; END IF;
    IF TG_OP <> 'DELETE' THEN new_value := to_jsonb(NEW) ->> TG_ARGV[1]; END IF;
    IF left_value IS NOT DISTINCT FROM new_value THEN RETURN NULL; END IF;
    IF left_value IS NOT NULL THEN PERFORM tally_add(TG_ARGV[0], left_value, -1); END IF;
    IF new_value IS NOT NULL THEN PERFORM tally_add(TG_ARGV[0], new_value, 1); END IF;
    RETURN NULL;
END $$;

-- TG_ARGV: the tally's name, the column ('' counts every insert), then the values that count.
CREATE OR REPLACE FUNCTION tally_counter() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    new_value text := '';
BEGIN
    IF TG_ARGV[1] <> '' THEN
        new_value := to_jsonb(NEW) ->> TG_ARGV[1];
        IF TG_OP = 'UPDATE' AND (to_jsonb(OLD) ->> TG_ARGV[1]) IS NOT DISTINCT FROM new_value THEN RETURN NULL; END IF;
        IF new_value IS NULL OR NOT (new_value = ANY (TG_ARGV[2:TG_NARGS - 1])) THEN RETURN NULL; END IF;
    END IF;
    PERFORM tally_add(TG_ARGV[0], new_value, 1);
    RETURN NULL;
END $$;
"""

DROP_FUNCTIONS = """
DROP FUNCTION IF EXISTS tally_counter();
DROP FUNCTION IF EXISTS tally_gauge();
DROP FUNCTION IF EXISTS tally_add(text, text, bigint);
"""


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _executed(sql: str) -> Callable[[StateApps, BaseDatabaseSchemaEditor], None]:
    def run(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        schema_editor.execute(sql)

    return run


def tally_functions() -> migrations.RunPython:
    return migrations.RunPython(_executed(FUNCTIONS), _executed(DROP_FUNCTIONS))


def tally_kept(*, table: str, name: str, column: str = "", counts: tuple[str, ...] = ()) -> migrations.RunPython:
    """A gauge of `column` when `counts` is empty, else a counter of arrivals at `counts` (of inserts when
    `column` is empty). The tally starts from the rows already there, counted under the trigger's lock, so no
    write falls between the count and the trigger."""
    for identifier in (table, name, column):  # migrations' constants, written into SQL as they are
        if identifier and not re.fullmatch(r"[a-z_][a-z0-9_]*", identifier):
            raise ValueError(f"not a plain identifier: {identifier!r}")
    trigger = f"tally_{name}"
    arguments = ", ".join(_quoted(value) for value in (name, column, *counts))
    if counts or not column:
        kind, events = "tally_counter", (f"INSERT OR UPDATE OF {column}" if column else "INSERT")
        where = f" WHERE {column} IN ({', '.join(map(_quoted, counts))})" if counts else ""
        label = column if column else "''"
        fill = f"SELECT {_quoted(name)}, {label}, count(*) FROM {table}{where} GROUP BY 2"  # noqa: S608
    else:
        kind, events = "tally_gauge", f"INSERT OR UPDATE OF {column} OR DELETE"
        fill = f"SELECT {_quoted(name)}, {column}, count(*) FROM {table} GROUP BY 2"  # noqa: S608
    forward = f"""
        CREATE TRIGGER {trigger} AFTER {events} ON {table}
            FOR EACH ROW EXECUTE FUNCTION {kind}({arguments});
        DELETE FROM tallies_tally WHERE name = {_quoted(name)};
        INSERT INTO tallies_tally (name, label, n) {fill};
    """  # noqa: S608
    backward = f"DROP TRIGGER IF EXISTS {trigger} ON {table}; DELETE FROM tallies_tally WHERE name = {_quoted(name)}"  # noqa: S608
    return migrations.RunPython(_executed(forward), _executed(backward))

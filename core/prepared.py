"""Reads that every poll makes, without paying for their SQL each time: compiled once per process, prepared once
per PostgreSQL connection.

An order's page is read again and again while its customer waits. Two costs there are the same every time:
the ORM building the SQL of a query whose shape never changes, and PostgreSQL planning it (for the order's
version, three times what running it costs). `prepared_rows` keeps the plan in the session (PREPARE, then
EXECUTE). `CompiledRead` builds the SQL of a queryset once and
turns rows into model instances the way the queryset itself would (select_related included).

A connection pooler that resets sessions (PgBouncer's transaction mode, DISCARD ALL) drops prepared
statements: one that went missing is prepared again, once, outside a transaction.
"""

from __future__ import annotations

import datetime as dt
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, TypeAlias, TypeVar, cast
from uuid import UUID

from django.db import DatabaseError, connection
from django.db.backends.utils import CursorWrapper
from django.db.models import Model, QuerySet

# Private, and not in django-stubs: tests/core/test_prepared_django_api.py pins what this module calls.
from django.db.models.query import get_related_populators  # type: ignore[attr-defined]
from django.db.models.sql.compiler import SQLCompiler

MISSING_STATEMENT = "26000"  # invalid_sql_statement_name
# The driver connections (one per database session) and the statements prepared in each.
_prepared_in: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
# What a parameter of these statements can be: a value the driver adapts to SQL.
SqlParam: TypeAlias = None | bool | int | float | Decimal | str | bytes | dt.date | dt.datetime | UUID
# A row as the driver returns it: one Python value per column, of the column's type (DB-API rows are untyped).
Row: TypeAlias = tuple[Any, ...]
_M = TypeVar("_M", bound=Model)


def prepared_rows(*, name: str, sql: str, params: Sequence[SqlParam]) -> list[Row]:
    """The rows of `sql` (with %s placeholders) for `params`, through a statement prepared in this session."""
    with connection.cursor() as cursor:
        names = _prepared_in.setdefault(connection.connection, set())
        if name not in names:
            _prepare(cursor, name, sql)
            names.add(name)
        execute = f"EXECUTE {name}({', '.join(['%s'] * len(params))})"
        try:
            cursor.execute(execute, params)
        except DatabaseError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != MISSING_STATEMENT or connection.in_atomic_block:
                raise
            _prepare(cursor, name, sql)
            cursor.execute(execute, params)
        rows: list[Row] = cursor.fetchall()
        return rows


def _prepare(cursor: CursorWrapper, name: str, sql: str) -> None:
    cursor.execute("SELECT 1 FROM pg_prepared_statements WHERE name = %s", [name])
    if cursor.fetchone() is None:  # a new session, or one this process has not seen yet
        numbered = iter(range(1, sql.count("%s") + 1))
        body = re.sub("%s", lambda _match: f"${next(numbered)}", sql)
        cursor.execute(f"PREPARE {name} AS {body}")  # parameter types inferred from their use


@dataclass(frozen=True)
class CompiledRead(Generic[_M]):
    """A queryset's SQL, built once, and the way back from its rows to its model instances (of model `_M`)."""

    sql: str
    compiler: SQLCompiler

    @classmethod
    def of(cls, queryset: QuerySet[_M]) -> CompiledRead[_M]:
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, _params = compiler.as_sql()  # also fills compiler.select and klass_info
        return cls(sql=sql, compiler=compiler)

    def objects(self, rows: list[Row]) -> list[_M]:
        """As django.db.models.query.ModelIterable does it, for rows of this SQL."""
        compiler = self.compiler
        klass_info, select = compiler.klass_info, compiler.select
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        names = [column[0].target.attname for column in select[start:end]]
        populators = get_related_populators(klass_info, select, compiler.using)
        found: list[_M] = []
        # results_iter only reads the rows: a list of tuples is the list of sequences it is typed for.
        for row in compiler.results_iter(results=[cast(list[Sequence[Any]], rows)]):
            obj = klass_info["model"].from_db(compiler.using, names, row[start:end])
            for populator in populators:
                populator.populate(row, obj)
            found.append(obj)
        return found

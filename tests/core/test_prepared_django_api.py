"""core/prepared.py's `CompiledRead` turns rows into model instances as Django's ModelIterable does, through
Django's private `django.db.models.query.get_related_populators`: no public API builds select_related objects from
rows. Its signature changes upstream (Django 6.1 adds a required `fetch_mode`, passed on to RelatedPopulator and
Model.from_db), so these tests pin what prepared.py calls against the Django installed, and say what to change."""

from __future__ import annotations

import inspect

from django.contrib.auth.models import Permission
from django.db import connection
from django.db.models import Model
from django.db.models.query import ModelIterable, RelatedPopulator, get_related_populators
from django.db.models.sql.compiler import SQLCompiler

from core.prepared import CompiledRead

UPGRADE = (
    "Django changed {name}, which core/prepared.py (CompiledRead.objects) calls as {called}. Read how "
    "django.db.models.query.ModelIterable.__iter__ of the installed Django builds its objects now and do the same "
    "in CompiledRead.objects (for Django 6.1's fetch_mode: the queryset's fetch mode, kept by CompiledRead.of, "
    "passed to get_related_populators and Model.from_db), then update this test."
)


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_get_related_populators_takes_what_prepared_passes():
    called = "get_related_populators(klass_info, select, compiler.using)"
    assert parameters(get_related_populators) == ["klass_info", "select", "db"], UPGRADE.format(
        name="get_related_populators", called=called
    )


def test_the_populators_and_from_db_take_what_prepared_passes():
    assert parameters(RelatedPopulator.populate) == ["self", "row", "from_obj"], UPGRADE.format(
        name="RelatedPopulator.populate", called="populator.populate(row, obj)"
    )
    assert parameters(Model.from_db) == ["db", "field_names", "values"], UPGRADE.format(
        name="Model.from_db", called='klass_info["model"].from_db(compiler.using, names, values)'
    )
    assert "results" in parameters(SQLCompiler.results_iter), UPGRADE.format(
        name="SQLCompiler.results_iter", called="compiler.results_iter(results=[rows])"
    )


def test_compiled_read_builds_the_objects_the_queryset_builds(db):
    queryset = Permission.objects.select_related("content_type").order_by("pk")[:5]
    read = CompiledRead.of(queryset)
    _sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(read.sql, params)
        rows = cursor.fetchall()

    objects = read.objects(rows)

    expected = list(ModelIterable(queryset))
    assert len(expected) == 5
    assert [(o.pk, o.codename) for o in objects] == [(o.pk, o.codename) for o in expected]
    for got, want in zip(objects, expected, strict=True):
        assert isinstance(got, Permission)
        assert Permission.content_type.is_cached(got)  # filled from the row, as select_related does
        assert (got.content_type.app_label, got.content_type.model) == (
            want.content_type.app_label,
            want.content_type.model,
        )

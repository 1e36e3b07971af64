"""Each parent's newest child row in one query that costs O(parents), however long the children's history."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from django.db.models import Model, OuterRef, QuerySet, Subquery

_M = TypeVar("_M", bound=Model)


def latest_rows(
    children: QuerySet[_M], *, parent: str, parent_ids: Iterable[int], newest_first: tuple[str, ...]
) -> dict[int, _M]:
    """{parent id: its newest row of `children`} for the given parents. The newest pk is looked up once per parent
    (an index on (parent, the order) makes each an index probe): a subquery correlated to the child rows instead
    runs once per child row and reads the whole history (issue 30: /ops/ at 100,000 orders took 8 s)."""
    ids = list(parent_ids)
    if not ids:
        return {}
    model: type[Model] = children.model
    parents = model._meta.get_field(parent).related_model._default_manager  # type: ignore[union-attr]
    newest = children.filter(**{parent: OuterRef("pk")}).order_by(*newest_first).values("pk")[:1]
    newest_pks = parents.filter(pk__in=ids).annotate(newest=Subquery(newest)).values("newest")
    rows = children.filter(pk__in=newest_pks)
    return {getattr(row, f"{parent}_id"): row for row in rows}

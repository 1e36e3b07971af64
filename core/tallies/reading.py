"""What the tallies say, for /metrics."""

from __future__ import annotations

from django.db import connection

from core.tallies.models import Tally


def tallied(name: str) -> dict[str, int] | None:
    """{label: n} of a tally, or None where no trigger keeps it (not PostgreSQL): the caller counts rows."""
    if connection.vendor != "postgresql":
        return None
    return dict(Tally.objects.filter(name=name).values_list("label", "n"))

"""What the tallies say, for /metrics."""

from __future__ import annotations

from core.tallies.models import Tally


def tallied(name: str) -> dict[str, int]:
    """{label: n} of a tally, kept by its trigger (core/tallies/triggers.py)."""
    return dict(Tally.objects.filter(name=name).values_list("label", "n"))

"""Running counts of rows, kept by PostgreSQL triggers (core/tallies/triggers.py) so that /metrics reads a
handful of rows instead of counting a whole history at each scrape."""

from __future__ import annotations

from django.db import models
from django.utils.translation import pgettext_lazy


class Tally(models.Model):
    """`n` rows of a table under `label` (a gauge: rows now in that status), or arrivals at `label` (a counter:
    it never goes down, whatever is deleted later). Written only by the triggers, in the writer's transaction."""

    name = models.CharField(max_length=100)
    label = models.CharField(max_length=100, blank=True)
    n = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = pgettext_lazy("staff", "tally")
        verbose_name_plural = pgettext_lazy("staff", "tallies")
        constraints = [models.UniqueConstraint(fields=["name", "label"], name="one_tally_per_label")]

    def __str__(self) -> str:
        return f"{self.name}{{{self.label}}} = {self.n}"

"""The fields every status-change event row shares (who, when, why); each event model adds its row and its
from/to fields with its own choices. Plumbing: imports no app."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class TransitionEvent(models.Model):
    """Who made a change of status, when, and why; each event model adds its row and the from/to fields."""

    created_at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=150, help_text="system, or the staff user's name")
    reason = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["created_at", "pk"]

"""The fields every status-change event row shares (who, when, why), and the common body of each model's one
status writer; each event model adds its row and its from/to fields with its own choices. Plumbing: imports no
app."""

from __future__ import annotations

import datetime as dt

from django.db import models, transaction
from django.utils import timezone


class TransitionEvent(models.Model):
    """Who made a change of status, when, and why; each event model adds its row and the from/to fields."""

    created_at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=150, help_text="system, or the staff user's name")
    reason = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["created_at", "pk"]


def status_move(
    *,
    row: models.Model,
    to: str,
    table: dict[str, frozenset[str]],
    event_model: type[TransitionEvent],
    link: str,
    actor: str,
    reason: str,
    now: dt.datetime | None,
    not_allowed: type[Exception],
) -> bool:
    """The common body of a model's one status writer: validate the move against its table, save the status
    alone, and write the event row (`link` names the event's foreign key to the row); True if it moved.
    A non-change is a no-op. The caller holds the row's lock, in the transaction the event row joins."""
    if to == row.status:
        return False
    if to not in table[row.status]:
        raise not_allowed(f"{row._meta.model_name} {row.pk}: {row.status} -> {to} is not allowed")
    assert transaction.get_connection().in_atomic_block, "a status moves only inside the caller's transaction"
    from_status = row.status
    row.status = to
    row.save(update_fields=["status"])
    event_model.objects.create(
        **{link: row}, created_at=now or timezone.now(), from_status=from_status, to_status=to, actor=actor,
        reason=reason,
    )
    return True

"""The fields every status-change event row shares (who, when, why), and the common body of each model's one
status writer; each event model adds its row and its from/to fields with its own choices. Plumbing: imports no
app."""

from __future__ import annotations

import contextlib
import datetime as dt

from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import pgettext_lazy


class TransitionEvent(models.Model):
    """Who made a change of status, when, and why; each event model adds its row and the from/to fields."""

    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    actor = models.CharField(
        max_length=150,
        help_text=pgettext_lazy("staff", "system, or the staff user's name"),
        verbose_name=pgettext_lazy("staff", "actor"),
    )
    reason = models.TextField(blank=True, verbose_name=pgettext_lazy("staff", "reason"))

    class Meta:
        abstract = True
        ordering = ["created_at", "pk"]


class TransitionNotAllowed(ValueError):
    """A move its status table does not allow; nothing was written. The one exception of every state machine."""


def status_move(
    *,
    row: models.Model,
    to: str,
    table: dict[str, frozenset[str]],
    event_model: type[models.Model],
    link: str,
    actor: str,
    reason: str,
    now: dt.datetime | None,
    label: str = "",
    field: str = "status",
    event_fields: tuple[str, str] = ("from_status", "to_status"),
    also: dict[str, object] | None = None,
    own_transaction: bool = False,
) -> bool:
    """The one body of every model's status writer: validate the move against its table, save the status (and
    the fields in `also` that change with it) alone, and write the event row (`link` names the event's foreign
    key to the row); True if it moved. A move to the status the row has is a no-op: False, nothing written (a
    writer that must move says so to its caller). The caller holds the row's lock, in the transaction the event
    row joins; `own_transaction`: the move is its own transaction (a savepoint inside the caller's, if any).
    `label` names the row in the refusal (default: the model and its key)."""
    current = getattr(row, field)
    if to == current:
        return False
    if to not in table[current]:
        raise TransitionNotAllowed(f"{label or f'{row._meta.model_name} {row.pk}'}: {current} -> {to} is not allowed")
    if not own_transaction:
        assert transaction.get_connection().in_atomic_block, "a status moves only inside the caller's transaction"
    also = also or {}
    with transaction.atomic() if own_transaction else contextlib.nullcontext():
        setattr(row, field, to)
        for name, value in also.items():
            setattr(row, name, value)
        row.save(update_fields=[field, *also])
        event_model._default_manager.create(
            **{link: row, event_fields[0]: current, event_fields[1]: to},
            created_at=now or timezone.now(),
            actor=actor,
            reason=reason,
        )
    return True

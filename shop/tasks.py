"""Thin Celery tasks: take a primary key, re-read the row, call the service."""

from __future__ import annotations

import logging
import smtplib

from celery import shared_task
from django.utils import timezone

from shop.orders import orders_expire_overdue
from shop.outbox import email_send, emails_due

log = logging.getLogger(__name__)


@shared_task(
    acks_late=True,
    autoretry_for=(smtplib.SMTPException, ConnectionError, TimeoutError),
    retry_backoff=True,
    max_retries=8,
)
def email_send_task(email_id: int) -> bool:
    return email_send(email_id=email_id)


@shared_task(acks_late=True)
def emails_send_due_task() -> int:
    """Emails whose first send never ran (broker down at commit, worker lost) or failed for good."""
    due = list(emails_due(timezone.now()).values_list("pk", flat=True)[:500])
    for email_id in due:
        email_send_task.delay(email_id)
    return len(due)


@shared_task(acks_late=True)
def reservations_release_expired_task() -> int:
    return orders_expire_overdue()

"""The order domain's Celery tasks: take a primary key, re-read the row, call the service."""

from __future__ import annotations

import logging
import smtplib

from celery import shared_task

from core.jobs.kinds import JobKind
from core.jobs.task import job_task
from orders.extensions import extensions_expire_overdue
from orders.orders import orders_expire_overdue
from orders.outbox import CLAIM, email_send
from orders.staff_notices import StaffWebhookFailed, staff_email_send, staff_webhook_send

log = logging.getLogger(__name__)


@job_task(
    kind=JobKind.EMAIL_SEND,
    lease_seconds=int(CLAIM.total_seconds()),
    acks_late=True,
    autoretry_for=(smtplib.SMTPException, ConnectionError, TimeoutError),
    retry_backoff=True,
    max_retries=8,
)
def email_send_task(email_id: int) -> bool:
    return email_send(email_id=email_id)


@job_task(
    kind=JobKind.STAFF_EMAIL,
    acks_late=True,
    autoretry_for=(smtplib.SMTPException, ConnectionError, TimeoutError),
    retry_backoff=True,
    max_retries=8,
)
def staff_email_task(subject: str, body: str, recipients: list[str]) -> int:
    """A staff notification's email (orders/staff_notices.py)."""
    return staff_email_send(subject=subject, body=body, recipients=recipients)


@job_task(
    kind=JobKind.STAFF_WEBHOOK,
    acks_late=True,
    autoretry_for=(StaffWebhookFailed,),
    retry_backoff=5,
    retry_backoff_max=300,
    max_retries=5,
)
def staff_webhook_task(text: str) -> int:
    """A staff notification's chat message; a failure is retried here, then by beat (the job outbox)."""
    return staff_webhook_send(text=text)


@shared_task(acks_late=True)
def reservations_release_expired_task() -> int:
    return orders_expire_overdue() + extensions_expire_overdue()  # extensions expire with their payment window

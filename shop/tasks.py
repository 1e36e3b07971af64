"""The storefront's Celery tasks: "Find my order", and the retention pass over the whole history."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.task import job_task
from shop.order_lookup import order_lookup_send
from shop.retention import history_prune


@job_task(kind=JobKind.ORDER_LOOKUP, acks_late=True)
def order_lookup_task(email: str) -> bool:
    """The "Find my order" job: stores the email listing the address's orders, if it has any."""
    return order_lookup_send(email=email) is not None


@shared_task(acks_late=True)
def history_prune_task() -> dict[str, int]:
    """Beat, hourly: what each retention rule says has had its time goes (shop/retention.py)."""
    return history_prune(now=timezone.now())

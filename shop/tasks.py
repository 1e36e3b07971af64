"""The storefront's Celery task: "Find my order"."""

from __future__ import annotations

from core.jobs.kinds import JobKind
from core.jobs.task import job_task
from shop.order_lookup import order_lookup_send


@job_task(kind=JobKind.ORDER_LOOKUP, acks_late=True)
def order_lookup_task(email: str) -> bool:
    """The "Find my order" job: stores the email listing the address's orders, if it has any."""
    return order_lookup_send(email=email) is not None

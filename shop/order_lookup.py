"""Find my order: a customer who lost their links gives an email and gets one email listing that address's orders.

The request always does the same thing, whatever the email: it stores one background job (shop.tasks) and
answers the same way, so neither the answer nor its timing says whether the address ever ordered. The job
looks the orders up and, when there are any, stores one email in the outbox (shop.outbox), sent to the address
the customer gave when ordering, in the language of their latest order.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from config.jobs.outbox import job_enqueue
from shop.models import Order, OutgoingEmail
from shop.order_links import order_status_path
from shop.outbox import email_context, email_enqueue

LOOKUP_TASK = "shop.tasks.order_lookup_task"
EMAIL_NAME = "order_lookup"


def orders_of_email(email: str) -> QuerySet[Order]:
    """The orders an address placed, newest first; case-insensitive; orders whose contact data was erased are
    not theirs any more."""
    return Order.objects.filter(email__iexact=email.strip(), personal_data_erased_at__isnull=True).order_by(
        "-created_at", "-pk"
    )


def order_lookup_request(*, email: str) -> None:
    """Queue the lookup; the same work whether or not the address has orders (no enumeration by timing)."""
    with transaction.atomic():
        job_enqueue(LOOKUP_TASK, email=email.strip())


def order_lookup_send(*, email: str) -> OutgoingEmail | None:
    """The job: one email listing the address's orders, or nothing when it has none."""
    with transaction.atomic():
        latest = orders_of_email(email).first()
        if latest is None:
            return None
        return email_enqueue(order_id=latest.pk, name=EMAIL_NAME)


@email_context(EMAIL_NAME)
def order_lookup_context(order: Order, params: dict) -> dict:
    # Read when the email is sent: an order erased meanwhile is left out, one placed meanwhile is listed.
    orders = orders_of_email(order.email).select_related("preparation")
    return {"orders": [(listed, settings.SITE_URL + order_status_path(listed)) for listed in orders]}

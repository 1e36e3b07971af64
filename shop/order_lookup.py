"""Find my order: a customer who lost their links gives an email and gets one email listing that address's orders.

The request always does the same thing, whatever the email: it stores one background job (shop/tasks.py) and
answers the same way, so neither the answer nor its timing says whether the address ever ordered. The job
looks the orders up and, when there are any, stores one email in the outbox (orders.outbox), sent to the address
the customer gave when ordering, in the language of their latest order.

"The same address" is core.email_address's: the orders listed are those whose stored match key equals the
asked address's, and the email goes to the latest one's stored address, which therefore has that key too. Never
the database's case-insensitive comparison: PostgreSQL's UPPER() folds `ı` to `I` and `ſ` to `S`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from core.email_address import EmailAddressInvalid, email_match_key
from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from orders.models import Order, OutgoingEmail
from orders.order_links import order_status_path
from orders.outbox import email_context, email_enqueue

LOOKUP_TASK = JobKind.ORDER_LOOKUP
EMAIL_NAME = "order_lookup"


def orders_of_email_key(key: str) -> QuerySet[Order]:
    """The orders placed with the address whose match key is `key`, newest first; orders whose contact data was
    erased are not theirs any more."""
    if not key:  # the key of addresses the rules refuse: it names nobody
        return Order.objects.none()
    return Order.objects.filter(email_key=key, personal_data_erased_at__isnull=True).order_by("-created_at", "-pk")


def order_lookup_request(*, email: str) -> None:
    """Queue the lookup of an accepted address; the same work whether or not it has orders (no enumeration by
    timing)."""
    key = email_match_key(email)
    with transaction.atomic():
        job_enqueue(LOOKUP_TASK, email=key)


def order_lookup_send(*, email: str) -> OutgoingEmail | None:
    """The job: one email listing the address's orders, or nothing when it has none."""
    try:
        key = email_match_key(email)
    except EmailAddressInvalid:  # queued before the rules: no address of theirs can match
        return None
    with transaction.atomic():
        latest = orders_of_email_key(key).first()
        if latest is None:
            return None
        return email_enqueue(order_id=latest.pk, name=EMAIL_NAME)


@email_context(EMAIL_NAME)
def order_lookup_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:  # an orders.outbox.ContextBuilder
    # Read when the email is sent: an order erased meanwhile is left out, one placed meanwhile is listed.
    orders = orders_of_email_key(order.email_key).select_related("preparation")
    return {"orders": [(listed, settings.SITE_URL + order_status_path(listed)) for listed in orders]}

"""Customer emails through an outbox: stored with the change they announce, sent at least once.

`email_enqueue` writes the row inside the caller's transaction, with the job that sends it (core/jobs):
if the broker is down when the transaction commits, beat sends the job later. A send claims the email row
first (compare-and-swap), so two deliveries never send it twice; a crash between the SMTP hand-off and
marking it sent is the one case where a customer gets it twice.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from orders.emails import send_templated_email
from orders.models import Extension, LotSpec, Order, OutgoingEmail
from orders.order_links import order_receipt_path, order_status_path

log = logging.getLogger(__name__)
CLAIM = dt.timedelta(minutes=5)  # longer than one SMTP send; a dead worker's claim lapses after it
EMAIL_SEND = JobKind.EMAIL_SEND

# name -> builder of the template context, registered by the app that owns the email (AppConfig.ready).
ContextBuilder = Callable[[Order, dict[str, Any]], dict[str, Any]]
CONTEXT_BUILDERS: dict[str, ContextBuilder] = {}


def email_context(*names: str) -> Callable[[ContextBuilder], ContextBuilder]:
    def register(builder: ContextBuilder) -> ContextBuilder:
        for name in names:
            CONTEXT_BUILDERS[name] = builder
        return builder

    return register


def email_enqueue(*, order_id: int, name: str, params: dict[str, Any] | None = None) -> OutgoingEmail:
    if name not in CONTEXT_BUILDERS:
        raise ValueError(f"no email called {name!r}")
    email = OutgoingEmail.objects.create(order_id=order_id, name=name, params=params or {})
    job_enqueue(EMAIL_SEND, email_id=email.pk)
    return email


def email_send(*, email_id: int, now: dt.datetime | None = None) -> bool:
    """Send one stored email unless it was sent or another worker holds it. Errors propagate (for retries)."""
    now = now or timezone.now()
    claimed = (
        OutgoingEmail.objects.filter(pk=email_id, sent_at__isnull=True)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claimed_until=now + CLAIM, attempts=F("attempts") + 1)
    )
    if claimed != 1:
        return False
    email = OutgoingEmail.objects.select_related("order").get(pk=email_id)
    order = email.order
    context = {
        "order": order,
        "status_url": settings.SITE_URL + order_status_path(order),
        "receipt_url": settings.SITE_URL + order_receipt_path(order),
        "site_url": settings.SITE_URL + "/",
        **CONTEXT_BUILDERS[email.name](order, email.params),
    }
    try:
        send_templated_email(name=email.name, to=order.email, language=order.language, context=context)
    except Exception as exc:
        OutgoingEmail.objects.filter(pk=email_id).update(claimed_until=None, last_error=repr(exc)[:300])
        raise
    OutgoingEmail.objects.filter(pk=email_id).update(sent_at=timezone.now(), claimed_until=None, last_error="")
    log.info("email %s sent for order %s", email.name, order.reference)
    return True


@email_context("order_received")
def order_received_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    return {"payment": order.payment, "lot": LotSpec.current()}


@email_context("order_expired")
def order_expired_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    return {"watch_days": settings.PAYMENT_WATCH_DAYS}


@email_context("extension_applied")
def extension_applied_context(order: Order, params: dict[str, Any]) -> dict[str, Any]:
    return {"extension": Extension.objects.get(pk=params["extension_id"], order=order)}

"""Staff hear of what waits on them: an email to the staff of the role concerned, and a chat message.

`staff_notify` is called inside the transaction of the step that changed something (an order paid, a payment
sent to review, a preparation failed, a node set aside, money leaving a deposit address unexplained): its jobs
(core/jobs) commit with that change or not at all, so a step that rolls back tells nobody, and a step run
twice changes nothing the second time and tells nobody again (the writers are no-ops on a status a row has).

Recipients are read when the step happens: the active users of the role's group with an email (core.roles),
plus `extra` addresses; nobody there, then `ADMINS`. With `STAFF_WEBHOOK_URL` set, a second job POSTs
`{"text": ...}` there (Slack, Mattermost and Discord-compatible hooks take it); a failing hook is retried by
the job outbox with backoff and never holds up the step or the email. What is sent names the order's
reference and links the admin or the operator console, never the customer's secret link.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.urls import reverse

from core.jobs.kinds import JobKind
from core.jobs.outbox import job_enqueue
from core.roles import ROLES
from orders.models import Order, OrderStatus

log = logging.getLogger(__name__)
EMAIL_TASK = JobKind.STAFF_EMAIL
WEBHOOK_TASK = JobKind.STAFF_WEBHOOK
WEBHOOK_TIMEOUT_SECONDS = 10


class StaffWebhookFailed(Exception):
    """The chat hook did not take the message. Its text never names the URL (a hook's URL is its secret)."""


def staff_recipients(*, roles: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    groups = [ROLES[role][0] for role in roles]
    users = get_user_model().objects.filter(is_active=True, groups__name__in=groups).exclude(email="")
    found = sorted(set(users.values_list("email", flat=True)) | set(extra))
    return found or [email for _name, email in settings.ADMINS]


def staff_notify(*, roles: Iterable[str], subject: str, body: str, link: str, extra: Iterable[str] = ()) -> None:
    """Store the email (and the chat message) for the step's staff, in the caller's transaction.
    `link` is a path on the site (the admin, /ops/)."""
    roles = list(roles)
    url = settings.SITE_URL + link
    recipients = staff_recipients(roles=roles, extra=extra)
    if recipients:
        job_enqueue(EMAIL_TASK, subject=subject, body=f"{body}\n\n{url}\n", recipients=recipients)
    else:
        log.warning("nobody to tell (no staff in %s, no ADMINS): %s", ", ".join(roles), subject)
    if settings.STAFF_WEBHOOK_URL:
        job_enqueue(WEBHOOK_TASK, text=f"{subject}\n{body}\n{url}")


def staff_email_send(*, subject: str, body: str, recipients: list[str]) -> int:
    return send_mail(f"[{settings.SELLER_NAME} staff] {subject}", body, None, recipients)


def staff_webhook_send(*, text: str) -> int:
    """POST the message; raises StaffWebhookFailed (retried) unless the hook answers 2xx."""
    url = settings.STAFF_WEBHOOK_URL
    if not url:
        return 0  # the setting was removed since the step: nothing to send to
    try:
        response = requests.post(url, json={"text": text}, timeout=WEBHOOK_TIMEOUT_SECONDS)
    except requests.RequestException as exc:
        raise StaffWebhookFailed(f"staff webhook unreachable: {type(exc).__name__}") from None
    if not 200 <= response.status_code < 300:
        raise StaffWebhookFailed(f"staff webhook answered HTTP {response.status_code}")
    return response.status_code


# What an order's new status asks of staff: (the roles told, the subject); the reason of the move is the body.
S = OrderStatus
ORDER_NOTICES: dict[str, tuple[tuple[str, ...], str]] = {
    S.PAID: (("operator",), "Order {reference} is paid and waits for its preparation"),
    S.NEEDS_REVIEW: (("reviewer",), "Order {reference}: its payment needs a review"),
    S.PREPARATION_FAILED: (("operator",), "Order {reference}: the preparation failed"),
}


def order_staff_notify(*, order: Order, to: str, reason: str) -> None:
    """Called by order_transition on a real change of status, in its transaction."""
    if to not in ORDER_NOTICES:
        return
    roles, subject = ORDER_NOTICES[to]
    where = ("admin:orders_order_change", [order.pk]) if to == S.NEEDS_REVIEW else ("provisioning:console", [])
    link = reverse(where[0], args=where[1])
    lots = order.lots
    body = f"Order {order.reference} ({lots} lot{'s' if lots != 1 else ''}, {order.duration_days} days) is now {to}."
    if reason:
        body += f"\nWhy: {reason[:500]}"
    staff_notify(roles=roles, subject=subject.format(reference=order.reference), body=body, link=link)

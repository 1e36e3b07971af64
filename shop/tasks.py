"""Thin Celery tasks: take a primary key, re-read the row, call the service."""

from __future__ import annotations

import logging
import smtplib

from celery import shared_task
from django.conf import settings

from shop.emails import send_templated_email
from shop.models import LotSpec, Order
from shop.orders import order_status_path, orders_expire_overdue

log = logging.getLogger(__name__)


@shared_task(
    acks_late=True,
    autoretry_for=(smtplib.SMTPException, ConnectionError, TimeoutError),
    retry_backoff=True,
    max_retries=8,
)
def order_email_received_task(order_id: int) -> None:
    order = (
        Order.objects.select_related("duration", "preparation", "payment__asset__network").filter(pk=order_id).first()
    )
    if order is None:
        log.info("order %s is gone; no email", order_id)
        return
    send_templated_email(
        name="order_received",
        to=order.email,
        language=order.language,
        context={
            "order": order,
            "payment": order.payment,
            "lot": LotSpec.current(),
            "status_url": settings.SITE_URL + order_status_path(order),
        },
    )


@shared_task(acks_late=True)
def reservations_release_expired_task() -> int:
    return orders_expire_overdue()

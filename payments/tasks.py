"""Thin Celery tasks: take a primary key, re-read the row, call the service; retry transient RPC errors."""

from __future__ import annotations

import datetime as dt
import logging
import smtplib

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.db.models import Q
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.task import job_task
from payments.models import Network, PaymentRequest
from payments.networks import rpc_urls
from payments.outflows import outflow_alert_send
from payments.rpc import RpcError
from payments.scan import scan_network
from payments.settle import payment_settle, payments_out_of_step
from payments.verify import notice_verify

log = logging.getLogger(__name__)
SCAN_LEASE = dt.timedelta(minutes=5)
# A node answering with an error is usually a node behind the others: retried too, within the limit. A
# database that is restarting, failing over or out of connections is transient too.
DATABASE_TRANSIENT = (OperationalError, InterfaceError)
TRANSIENT = (RpcError, ConnectionError, TimeoutError, *DATABASE_TRANSIENT)


def scan_lease_claim(network: Network, now: dt.datetime) -> bool:
    """Compare-and-swap: only one worker scans a network at a time."""
    claimed = (
        Network.objects.filter(pk=network.pk)
        .filter(Q(scan_lease_until__isnull=True) | Q(scan_lease_until__lt=now))
        .update(scan_lease_until=now + SCAN_LEASE)
    )
    return claimed == 1


@shared_task(acks_late=True, autoretry_for=TRANSIENT, retry_backoff=5, retry_backoff_max=120, max_retries=5)
def scan_network_task(network_id: int) -> str:
    network = Network.objects.filter(pk=network_id, enabled=True).first()
    if network is None or not rpc_urls(network):
        return "skipped"
    now = timezone.now()
    if not scan_lease_claim(network, now):
        return "another scan holds the lease"
    try:
        return str(scan_network(network=network))
    finally:
        Network.objects.filter(pk=network.pk).update(scan_lease_until=None)


@shared_task(acks_late=True)
def scan_all_networks_task() -> int:
    networks = [network for network in Network.objects.filter(enabled=True) if rpc_urls(network)]
    for network in networks:
        scan_network_task.delay(network.pk)
    # A settlement that failed after its credit became final is not in any later pass's changes: found here.
    for payment_id in payments_out_of_step(now=timezone.now()):
        payment_settle_task.delay(payment_id)
    return len(networks)


@shared_task(acks_late=True, autoretry_for=DATABASE_TRANSIENT, retry_backoff=2, retry_backoff_max=120, max_retries=20)
def payment_settle_task(payment_id: int) -> str | None:
    return payment_settle(payment_id=payment_id)


@job_task(
    kind=JobKind.NOTICE_VERIFY,
    acks_late=True,
    autoretry_for=TRANSIENT,
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=6,
)
def notice_verify_task(notice_id: int, more_notice_ids: list[int] | None = None) -> None:
    """One "I have paid" press: its notice and those of the other items it covers (the order's extension), in
    one job, however many there are."""
    network_ids = set()
    for one in [notice_id, *(more_notice_ids or [])]:
        for payment_id in notice_verify(notice_id=one):
            payment_settle(payment_id=payment_id)
            network_ids |= set(PaymentRequest.objects.filter(pk=payment_id).values_list("asset__network_id", flat=True))
    # Without a tx hash, or to see confirmations move: a pass over each network concerned, now (one each).
    for network_id in sorted(network_ids):
        scan_network_task.delay(network_id)


@job_task(
    kind=JobKind.OUTFLOW_ALERT,
    acks_late=True,
    autoretry_for=(smtplib.SMTPException, ConnectionError, TimeoutError),
    retry_backoff=True,
    max_retries=8,
)
def outflow_alert_task(outflow_id: int) -> int:
    """Staff hear of money that left a deposit address unexplained (payments/outflows.py)."""
    return outflow_alert_send(outflow_id=outflow_id)

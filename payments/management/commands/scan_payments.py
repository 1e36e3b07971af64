"""`manage.py scan_payments`: one verification pass over every open payment, then exit."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from payments.models import Network
from payments.networks import rpc_urls
from payments.rpc import RpcError
from payments.scan import scan_network
from payments.settle import payment_settle, payments_out_of_step


class Command(BaseCommand):
    help = "Run one verification pass on every enabled network with an RPC URL."

    def handle(self, *args: Any, **options: Any) -> None:
        failed = 0
        for network in Network.objects.filter(enabled=True):
            if not rpc_urls(network):
                continue
            try:
                report = scan_network(network=network)
            except RpcError as exc:
                failed += 1
                self.stderr.write(f"{network.slug}: RPC failed: {exc}")
                continue
            self.stdout.write(str(report))
        for payment_id in payments_out_of_step(now=timezone.now()):  # a settlement that failed earlier
            self.stdout.write(f"payment {payment_id} settled again: {payment_settle(payment_id=payment_id)}")
        if failed:
            raise SystemExit(1)

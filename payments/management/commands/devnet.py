"""`manage.py devnet setup [--rpc-url URL]` and `manage.py devnet pay <reference> [--amount DECIMAL]`."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.core.management.base import BaseCommand, CommandError

from payments.devnet import DevnetError, devnet_pay, devnet_setup
from payments.models import Network, PaymentRequest
from payments.networks import rpc_urls
from payments.rpc import RpcClient, RpcError


class Command(BaseCommand):
    help = "The local development chain: deploy test tokens (setup) or pay an order from a funded account (pay)."

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        setup = sub.add_parser("setup", help="register the local network and its test USDC/USDT")
        setup.add_argument("--rpc-url", help="the chain's JSON-RPC URL (default: CHAIN_RPC_URLS_LOCAL)")
        pay = sub.add_parser("pay", help="pay an order from a funded development account")
        pay.add_argument("reference")
        pay.add_argument("--amount", help="whole units of the order's asset (default: the quoted amount)")
        pay.add_argument("--rpc-url")

    def handle(self, *args, **options) -> None:
        network = Network.objects.filter(slug="local").first()
        if network is None:
            raise CommandError("the local network is missing: run migrate first")
        urls = [options["rpc_url"]] if options.get("rpc_url") else rpc_urls(network)
        client = RpcClient(urls)
        try:
            if options["action"] == "setup":
                for line in devnet_setup(client=client):
                    self.stdout.write(line)
                return
            payment = (
                PaymentRequest.objects.select_related("asset__network")
                .filter(order__reference=options["reference"].upper())
                .first()
            )
            if payment is None:
                raise CommandError(f"no order {options['reference']}")
            if payment.chain_id != network.chain_id:
                raise CommandError(f"order {options['reference']} pays on {payment.asset.network.name}, not locally")
            amount = _decimal(options["amount"]) if options["amount"] else None
            tx_hash = devnet_pay(client=client, payment=payment, amount=amount)
            self.stdout.write(f"paid {options['reference']}: {tx_hash}")
        except (DevnetError, RpcError) as exc:
            raise CommandError(str(exc)) from None


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        raise CommandError(f"--amount {text!r} is not a number") from None

"""`manage.py devnet setup [--rpc-url URL]`, `manage.py devnet pay <reference> [--amount DECIMAL]` and
`manage.py devnet mint <address> <amount> [--asset USDC]`."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from eth_utils import to_checksum_address

from payments.devnet import DevnetError, devnet_mint, devnet_pay, devnet_setup
from payments.models import Network, PaymentRequest
from payments.networks import rpc_urls
from payments.rpc import RpcClient, RpcError


class Command(BaseCommand):
    help = (
        "The local development chain: deploy test tokens (setup), pay an order from a funded account (pay), "
        "or mint test tokens to a wallet of your own (mint)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        setup = sub.add_parser("setup", help="register the local network and its test USDC/USDT")
        setup.add_argument("--rpc-url", help="the chain's JSON-RPC URL (default: CHAIN_RPC_URLS_LOCAL)")
        pay = sub.add_parser("pay", help="pay an order from a funded development account")
        pay.add_argument("reference")
        pay.add_argument("--amount", help="whole units of the order's asset (default: the quoted amount)")
        pay.add_argument("--rpc-url")
        mint = sub.add_parser("mint", help="test tokens (or ETH for gas) to any address, e.g. your own wallet's")
        mint.add_argument("address")
        mint.add_argument("amount", help="whole units, e.g. 250.5")
        mint.add_argument("--asset", default="USDC", help="USDC (default), USDT, or ETH (sent from a funded account)")
        mint.add_argument("--rpc-url")

    def handle(self, *args: Any, **options: Any) -> None:
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
            if options["action"] == "mint":
                self._mint(client, options)
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
            amount = _decimal(options["amount"], "--amount") if options["amount"] else None
            tx_hash = devnet_pay(client=client, payment=payment, amount=amount)
            self.stdout.write(f"paid {options['reference']}: {tx_hash}")
        except (DevnetError, RpcError) as exc:
            raise CommandError(str(exc)) from None

    def _mint(self, client: RpcClient, options: dict[str, Any]) -> None:
        amount = _decimal(options["amount"], "amount")
        tx_hash = devnet_mint(client=client, symbol=options["asset"], to=options["address"], amount=amount)
        address = to_checksum_address(options["address"])
        self.stdout.write(f"minted {amount} {options['asset'].upper()} to {address}: {tx_hash}")


def _decimal(text: str, name: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise CommandError(f"{name} {text!r} is not a number") from None
    if not value.is_finite():
        raise CommandError(f"{name} {text!r} is not a number")
    return value

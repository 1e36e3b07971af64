"""Native coin (ETH, BNB, POL) at the watched addresses, without reading every block (issue 26). Reading blocks in
full costs the chain's whole block rate, whatever is watched (Arbitrum: about 345,000 full blocks a day; Polygon
or Base: gigabytes a day), so an address's coin is followed by its balance and nonce instead, and blocks are read
in full only where they moved:

- an address the network has no baseline for is read in full over the pass's ranges (its first pass); its
  baseline is then a fresh account's (no coin, nonce 0) at the pass's last block, which costs no call;
- every pass, the balances of the network's native-coin orders (one call each), so that a payment is seen on the
  pass after it lands;
- every COIN_CHECK_SECONDS, the balance and nonce of every watched address (two calls each): coin sent to a token
  order's address (a wrong coin or network) is found by the next check, and a nonce that moved finds coin in and
  out between two checks (a plain account moves coin out only by signing);
- where a balance or nonce differs from the baseline, the blocks since the baseline are read in full for the
  transfers (payments/native.py), and the baseline moves only once they are recorded.

A reorg that takes coin away is found by the credits' receipts (payments/reconfirm.py); one that brings coin in
changes the balance.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal

from django.conf import settings

from payments.credits import Transfer
from payments.models import Asset, CoinBaseline, Network, PaymentRequest, ScanCursor
from payments.native import top_level_moves
from payments.rpc import RpcClient


class CoinWatch:
    """One pass's view of a network's native coin at the watched addresses."""

    def __init__(self, *, network: Network, client: RpcClient, asset: Asset, watched: list[PaymentRequest]) -> None:
        self.network, self.client, self.asset = network, client, asset
        self.by_address = {payment.address.lower(): payment for payment in watched}
        self.own = {payment.address.lower() for payment in watched if payment.asset_id == asset.pk}
        baselines = CoinBaseline.objects.filter(network=network)
        # An address no longer watched keeps no baseline: watched again later, it starts afresh.
        baselines.exclude(payment__in=[payment.pk for payment in watched]).delete()
        self.baselines = {row.payment.address.lower(): row for row in baselines.select_related("payment")}

    def read_in_full(self) -> set[str]:
        """The addresses whose coin this pass finds in the blocks it reads: those without a baseline yet."""
        return set(self.by_address) - set(self.baselines)

    def after_pass(
        self,
        *,
        cursor: ScanCursor,
        last_read: int,
        now: dt.datetime,
        record: Callable[[list[Transfer], list[Transfer]], None],
    ) -> dict[str, int]:
        """The checks due after a pass that read up to `last_read`, and the baselines of the addresses it read
        in full. `record(coin_in, coin_out)` stores what moved before any baseline moves past it. Returns the
        balances it read at `last_read`, by address (read once a pass, whoever needs them)."""
        if last_read < 0:
            return {}
        due = cursor.coin_checked_at is None or (now - cursor.coin_checked_at).total_seconds() >= (
            settings.COIN_CHECK_SECONDS
        )
        behind = {address: row for address, row in self.baselines.items() if row.block_number < last_read}
        checked = sorted(behind if due else set(behind) & self.own)
        states = self._states(checked, last_read, nonces=due)
        moved = [address for address in checked if states[address] != self._state(behind[address], nonce=due)]
        if moved:
            record(
                *top_level_moves(
                    network=self.network,
                    client=self.client,
                    asset=self.asset,
                    start=min(behind[address].block_number for address in moved) + 1,
                    end=last_read,
                    addresses=set(moved),
                )
            )
        for address in checked:
            balance, nonce = states[address]
            CoinBaseline.objects.filter(pk=behind[address].pk).update(
                balance=balance, nonce=behind[address].nonce if nonce is None else nonce, block_number=last_read
            )
        CoinBaseline.objects.bulk_create(
            [
                CoinBaseline(
                    network=self.network, payment=self.by_address[address], balance=0, nonce=0, block_number=last_read
                )
                for address in sorted(self.read_in_full())
            ],
            ignore_conflicts=True,
        )
        if due:
            cursor.coin_checked_at = now
            cursor.save(update_fields=["coin_checked_at"])
        return {address: int(balance) for address, (balance, _nonce) in states.items()}

    @staticmethod
    def _state(row: CoinBaseline, *, nonce: bool) -> tuple[Decimal, int | None]:
        return Decimal(row.balance), int(row.nonce) if nonce else None

    def _states(self, addresses: list[str], block: int, *, nonces: bool) -> dict[str, tuple[Decimal, int | None]]:
        """(balance, nonce or None) of each address at `block`: one batch, one or two calls an address."""
        calls = []
        for address in addresses:
            calls.append(("eth_getBalance", [address, hex(block)]))
            if nonces:
                calls.append(("eth_getTransactionCount", [address, hex(block)]))
        answers = iter(self.client.batch(calls) if calls else [])
        return {
            address: (Decimal(int(next(answers), 16)), int(next(answers), 16) if nonces else None)
            for address in addresses
        }

"""What shop calls at checkout: prepare a quote (network I/O, before any lock), then open the request."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from payments.addresses import derive_address, key_fingerprint
from payments.models import AddressCursor, Asset, Network, PaymentRequest
from payments.networks import rpc_client, rpc_urls
from payments.quotes import QuoteError, UsdRate, to_base_units, usd_rate
from payments.rpc import RpcError

if TYPE_CHECKING:
    from orders.models import Extension, Order


@dataclass(frozen=True)
class PreparedQuote:
    asset: Asset
    amount_usd: Decimal
    rate: UsdRate
    amount_base_units: int
    start_block: int


# How old a head may be and still start a payment's watch. Any start block at or below the chain's real head is
# safe: only transfers from that block on count, and the deposit address is brand new (the next derivation
# index, never handed out before), so nothing can be waiting on it between that block and the head but money
# sent to the shop's own address (by someone who knows the account key, and who pays either way). What must never
# happen is a start block above the real head: a customer's transfer mined in between would not count. A head
# read seconds ago is at or below the head now (a reorg to a shorter chain could meet a fresh read as well); the
# scan records the lower head of two providers where two are configured, so one provider running ahead cannot
# lift it, and a checkout's own reading trusts one provider, as every quote did before. Customers can neither
# choose nor write what is kept (the key is the network and its configured URLs). The age bounds what is left: a
# network that stopped answering is still offered for at most this long (the scan then marks it down), and an
# address given out again after a database restore counts at most these seconds of older transfers.
HEAD_FRESH_SECONDS = 5


def quote_prepare(*, asset: Asset, amount_usd: Decimal) -> PreparedQuote:
    """Price the amount and find where to start watching; raises QuoteError with a customer-facing message.

    Runs before the order's transaction, so no lock is held while the RPC answers, when it is asked at all.
    """
    rate = usd_rate(asset)
    return PreparedQuote(
        asset=asset,
        amount_usd=amount_usd,
        rate=rate,
        amount_base_units=to_base_units(amount_usd, rate, asset.decimals),
        start_block=start_block(asset.network),
    )


def start_block(network: Network) -> int:
    """The chain's head as read in the last HEAD_FRESH_SECONDS, by an earlier checkout (shared through the cache)
    or by the scan (the network's health record); else the chain is asked now, and a network that does not
    answer is refused."""
    key = _head_key(network)
    known: tuple[int, float] | None = cache.get(key)  # (head, when it was read)
    if known is not None and time.time() - known[1] <= HEAD_FRESH_SECONDS:
        return known[0]
    fresh_from = timezone.now() - dt.timedelta(seconds=HEAD_FRESH_SECONDS)
    recorded = (
        Network.objects.filter(pk=network.pk, rpc_ok=True, rpc_checked_at__gte=fresh_from, head_block__isnull=False)
        .values_list("head_block", "rpc_checked_at")
        .first()
    )
    # Both are set when the row is found (head_block__isnull=False, rpc_checked_at__gte): said for mypy.
    if recorded is not None and recorded[0] is not None and recorded[1] is not None:
        head, read_at = recorded[0], recorded[1].timestamp()
    else:
        read_at = time.time()  # before the request: the reading is at least this old
        try:
            head = rpc_client(network).block_number()
        except RpcError:
            raise QuoteError(
                _("%(network)s is not answering right now: choose another network or try again in a minute.")
                % {"network": network.name}
            ) from None
    cache.set(key, (head, read_at), HEAD_FRESH_SECONDS)
    return head


def _head_key(network: Network) -> str:
    # A reading holds for the providers it came from: other URLs (an operator's change) are asked afresh.
    urls = hashlib.sha256(",".join(rpc_urls(network)).encode()).hexdigest()[:16]
    return f"payments:head:{network.pk}:{urls}"


def payment_deadline(now: dt.datetime) -> dt.datetime:
    """The end of the quote's window; the address stays watched well after it."""
    return now + dt.timedelta(minutes=settings.PAYMENT_WINDOW_MINUTES)


def derivation_index_take(*, fingerprint: str) -> int:
    """The account key's next derivation index, taken for good unless the caller's transaction rolls back.

    One conditional UPDATE reads the cursor and moves it on; the row lock it takes, held until the caller
    commits, makes a concurrent checkout wait and then take the next index. The unique constraints (one address
    per key and index, one row per address) are the backstop.
    """
    assert transaction.get_connection().in_atomic_block, "an index is taken inside the checkout's transaction"
    index = _cursor_advance(fingerprint)
    if index is None:  # the key's first address: its cursor is made once (a racing first waits on its unique key)
        AddressCursor.objects.get_or_create(key_fingerprint=fingerprint)
        index = _cursor_advance(fingerprint)
        assert index is not None, "the cursor row was just made (or found)"
    return index


def _cursor_advance(fingerprint: str) -> int | None:
    """The index the cursor pointed at, after moving it on by one; None when the key has no cursor yet."""
    meta, quote = AddressCursor._meta, connection.ops.quote_name
    table, key, next_index = (
        quote(meta.db_table),
        quote(meta.get_field("key_fingerprint").column),
        quote(meta.get_field("next_index").column),
    )
    advance = (  # names from the model; the one value is a parameter
        f"UPDATE {table} SET {next_index} = {next_index} + 1 "  # noqa: S608
        f"WHERE {key} = %s RETURNING {next_index} - 1"
    )
    with connection.cursor() as cursor:
        cursor.execute(advance, [fingerprint])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def order_first_payment(order: Order) -> PaymentRequest:
    """The order's first payment request as the row it is (`Order.payment`, which orders types by what it reads:
    orders.first_payment). Raises Order.PaymentMissing as the property does."""
    payment = order.payment
    assert isinstance(payment, PaymentRequest), f"order {order.pk}: its payment is a {type(payment).__name__}"
    return payment


def payment_request_open(
    *, order: Order, quote: PreparedQuote, now: dt.datetime, extension: Extension | None = None
) -> PaymentRequest:
    """The order's own deposit address and frozen quote (or an extension's: a new address of its own). Must run
    inside the order's transaction."""
    assert transaction.get_connection().in_atomic_block, "payment_request_open needs the order's transaction"
    fingerprint = key_fingerprint()
    index = derivation_index_take(fingerprint=fingerprint)
    asset = quote.asset
    return PaymentRequest.objects.create(
        order=order,
        extension=extension,
        asset=asset,
        chain_id=asset.network.chain_id,
        contract=asset.contract,
        decimals=asset.decimals,
        key_fingerprint=fingerprint,
        derivation_index=index,
        address=derive_address(index),
        amount_usd=quote.amount_usd,
        usd_rate=quote.rate.usd_per_unit,
        rate_as_of=quote.rate.as_of,
        amount_base_units=quote.amount_base_units,
        expires_at=payment_deadline(now),
        watch_until=payment_deadline(now) + dt.timedelta(days=settings.PAYMENT_WATCH_DAYS),
        start_block=quote.start_block,
        created_at=now,
    )

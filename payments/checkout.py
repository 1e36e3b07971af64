"""What shop calls at checkout: prepare a quote (network I/O, before any lock), then open the request."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from payments.addresses import derive_address, key_fingerprint
from payments.models import AddressCursor, Asset, PaymentRequest
from payments.networks import rpc_client
from payments.quotes import QuoteError, UsdRate, to_base_units, usd_rate
from payments.rpc import RpcError

if TYPE_CHECKING:
    from shop.models import Extension, Order


@dataclass(frozen=True)
class PreparedQuote:
    asset: Asset
    amount_usd: Decimal
    rate: UsdRate
    amount_base_units: int
    start_block: int


def quote_prepare(*, asset: Asset, amount_usd: Decimal) -> PreparedQuote:
    """Price the amount and read the chain's height; raises QuoteError with a customer-facing message.

    Runs before the order's transaction, so no lock is held while the RPC answers.
    """
    rate = usd_rate(asset)
    try:
        start_block = rpc_client(asset.network).block_number()
    except RpcError:
        raise QuoteError(
            _("%(network)s is not answering right now: choose another network or try again in a minute.")
            % {"network": asset.network.name}
        ) from None
    return PreparedQuote(
        asset=asset,
        amount_usd=amount_usd,
        rate=rate,
        amount_base_units=to_base_units(amount_usd, rate, asset.decimals),
        start_block=start_block,
    )


def payment_deadline(now: dt.datetime) -> dt.datetime:
    """The end of the quote's window; the address stays watched well after it."""
    return now + dt.timedelta(minutes=settings.PAYMENT_WINDOW_MINUTES)


def _next_derivation_index(fingerprint: str) -> int:
    # The cursor row lock serialises concurrent checkouts; the unique constraints are the backstop.
    cursor, _created = AddressCursor.objects.select_for_update().get_or_create(key_fingerprint=fingerprint)
    index = cursor.next_index
    cursor.next_index = index + 1
    cursor.save(update_fields=["next_index"])
    return index


def payment_request_open(
    *, order: Order, quote: PreparedQuote, now: dt.datetime, extension: Extension | None = None
) -> PaymentRequest:
    """The order's own deposit address and frozen quote (or an extension's: a new address of its own). Must run
    inside the order's transaction."""
    assert transaction.get_connection().in_atomic_block, "payment_request_open needs the order's transaction"
    fingerprint = key_fingerprint()
    index = _next_derivation_index(fingerprint)
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

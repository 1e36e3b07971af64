"""An address stays watched while the books say money is on it (issue 25, item 2): a paid order's address past
its watch window, never named by a treasury plan, whose deposit key leaks; and one the books show emptied, which
the scan stops reading. Real anvil and USDC; the transfers out are signed with the deposit key."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from payments.models import PaymentRequest, UnexpectedOutflow
from tests.payments.verification.deposit_keys import (  # noqa: F401 - known_keys: an autouse fixture
    STRANGER,
    TREASURY,
    deposit_wallet,
    known_keys,
    paid,
)
from tests.payments.verification.helpers import payment_of, units


def past_its_window(placed: dict) -> None:
    PaymentRequest.objects.filter(pk=payment_of(placed).pk).update(watch_until=timezone.now() - dt.timedelta(days=1))


def test_a_leak_from_a_paid_address_past_its_window_that_no_plan_named_is_seen(chain, customer, scan_pass):
    # Given a paid order whose money is still on its address, past its watch window, and no plan ever named it
    placed = paid(chain, customer, scan_pass)
    past_its_window(placed)
    assert payment_of(placed).holds_money

    # When someone with its deposit key takes the money
    sent = deposit_wallet(chain, placed).transfer(chain.usdc, STRANGER, units(placed))
    scan_pass()

    # Then the scan still reads the address: the leak is an unexpected outflow, and the books show it empty
    outflow = UnexpectedOutflow.objects.get()
    assert (outflow.tx_hash, int(outflow.amount_base_units)) == (sent.tx_hash.lower(), units(placed))
    assert not payment_of(placed).holds_money


def test_an_address_the_books_show_swept_is_no_longer_read_past_its_window(chain, customer, scan_pass):
    # Given a paid order past its window, swept to the treasury while it was read
    placed = paid(chain, customer, scan_pass)
    past_its_window(placed)
    deposit_wallet(chain, placed).transfer(chain.usdc, TREASURY, units(placed))
    scan_pass()
    assert not payment_of(placed).holds_money
    assert not PaymentRequest.objects.watched(timezone.now()).filter(pk=payment_of(placed).pk).exists()

    # When money arrives on it again, a second sweep is not waited for: the address is no longer read
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], 1)
    chain.mine(1)
    scan_pass()
    assert payment_of(placed).credits.count() == 1

"""What the books say is on a deposit address: what arrived (the shop's own gas top-ups aside: fees spend them),
less the refunds sent, the sweeps and the unexpected outflows the scan saw. The treasury plan reads the assets
left; the scan keeps reading an address while anything is left (`PaymentRequest.holds_money`)."""

from __future__ import annotations

from collections import defaultdict

from payments.models import CreditKind, PaymentRequest, Refund, RefundStatus, Sweep, UnexpectedOutflow


def books_left(payment: PaymentRequest) -> dict[str, int]:
    """Per token contract ('' for the coin), what the books say is still on the address. Reads the payment's
    relations through `.all()`, so a prefetched payment costs no query."""
    left: dict[str, int] = defaultdict(int)
    for credit in payment.credits.all():
        if credit.on_chain and credit.kind != CreditKind.GAS:
            left[credit.token_contract.lower()] += int(credit.amount_base_units)
    gone: list[Refund | Sweep | UnexpectedOutflow] = [
        r for r in payment.refunds.all() if r.status in (RefundStatus.SENT, RefundStatus.CONFIRMED)
    ]
    gone += [s for s in payment.sweeps.all() if s.removed_at is None] + list(payment.unexpected_outflows.all())
    for row in gone:
        left[row.token_contract.lower()] -= int(row.amount_base_units)
    return dict(left)


def payment_books_refresh(*, payment_id: int) -> bool:
    """Keep `holds_money` what the books say, after money came in or left (a credit, a refund sent, a sweep, an
    outflow, or a reorg undoing one). Returns the new value."""
    payment = PaymentRequest.objects.get(pk=payment_id)
    holds = any(amount > 0 for amount in books_left(payment).values())
    PaymentRequest.objects.filter(pk=payment_id).exclude(holds_money=holds).update(holds_money=holds)
    return holds

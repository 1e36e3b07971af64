"""What the order domain reads of an order's first payment request (`Order.payment`).

The row is a payments.models.PaymentRequest, which orders may not name (the layers contract in pyproject.toml:
payments sits above orders). Orders reads it through this protocol; the layers above that need the row itself
read it typed through payments.checkout.order_first_payment.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Protocol


class FirstPayment(Protocol):
    @property
    def pk(self) -> Any: ...  # noqa: ANN401 - Django's own type for a primary key

    @property
    def expires_at(self) -> dt.datetime | None: ...  # the end of the holds' window (orders.payment_outcome)

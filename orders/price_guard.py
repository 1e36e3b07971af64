"""The customer's guard against a price that moved: a script (or the wizard) sends the total it expects, and an
order or extension whose price is no longer that total is refused with the price of now, nothing stored."""

from __future__ import annotations

from decimal import Decimal

from django.utils.translation import gettext as _

from core.input_errors import CodedRefusal


class PriceChanged(CodedRefusal):
    code = "price_changed"

    def __init__(self, total_usd: Decimal) -> None:
        super().__init__(
            _("The price is now %(total)s USD, not the total you expected. Check it and send again.")
            % {"total": f"{total_usd:.2f}"},
            total_usd=f"{total_usd:.2f}",
        )
        self.total_usd = total_usd


def price_as_expected(*, expected_usd: Decimal | None, total_usd: Decimal) -> None:
    """Raises PriceChanged when an expected total was sent and the price is another."""
    if expected_usd is not None and expected_usd != total_usd:
        raise PriceChanged(total_usd)

"""`{% load money_text %}`: amounts and addresses as a customer reads and checks them.

Amounts are shown in the page's locale ("899,00" in French) but copied in the form every wallet accepts
("899.00"); addresses are shown whole, in groups of four, so that both ends can be compared at a glance
(address poisoning copies the first and last few characters), and copied without the gaps.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation

from django import template
from django.utils.formats import get_format, number_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

register = template.Library()

GROUP = 4  # characters per group: what wallets and explorers abbreviate to ("0x5290…9EE7")


@register.simple_tag
def page_number_format() -> str:
    """The active language's separators as JSON, for `<html data-number-format>`: the scripts write numbers
    as `amount_l10n` does (es and fr group by a no-break space, which the browser's Intl does not)."""
    grouping = get_format("NUMBER_GROUPING")
    return json.dumps(
        {
            "decimal": get_format("DECIMAL_SEPARATOR"),
            "group": get_format("THOUSAND_SEPARATOR"),
            "grouping": grouping if isinstance(grouping, int) and grouping > 0 else 3,
        }
    )


@register.filter
def amount_l10n(value: object, places: int | None = None) -> str:
    """A decimal amount in the active locale, every digit kept (a crypto amount is exact), grouped by
    thousands; `places` pads to a fixed number of decimals (2 for USD). Text that is no number is kept."""
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value)
    if places is not None:
        number = number.quantize(Decimal(1).scaleb(-int(places)))
    return number_format(number, use_l10n=True, force_grouping=True)


def address_groups_of(address: str) -> list[str]:
    """'0x' and the hexadecimal digits in groups of four, the last group possibly shorter."""
    body = address[2:] if address[:2].lower() == "0x" else address
    groups = [body[i : i + GROUP] for i in range(0, len(body), GROUP)]
    return (["0x"] if body is not address else []) + groups


@register.filter
def address_groups(address: str) -> SafeString:
    """The address as spans (no spaces: a selection copies it as it is), the first and last groups marked,
    a line-break opportunity between groups."""
    groups = address_groups_of(address or "")
    if len(groups) < 3:
        return format_html("{}", address or "")
    prefix = 1 if groups[0] == "0x" else 0
    ends = {prefix, len(groups) - 1}
    return format_html_join(
        SafeString("<wbr>"),
        '<span class="{}">{}</span>',
        (("address__group address__group--end" if i in ends else "address__group", g) for i, g in enumerate(groups)),
    )

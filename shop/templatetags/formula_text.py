"""`{% load formula_text %}`: the fit advisor's formulas as a customer reads them on any screen.

A formula is one long line ("weights = P × 2 B (BF16) ÷ 2 = 13,000,000,000 × 2 B ÷ 2 = 13.0 GB"): on a phone it
has to wrap, but between its terms, never inside a number or between a number and its unit ("13,000,0" on one
line and "00,000" on the next reads as two numbers).
"""

from __future__ import annotations

import re

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# A number with its grouping and decimal separators (",", ".", the French narrow and plain no-break spaces),
# and the unit that follows it, if any; not the digits of a word ("BF16", "FP32"), which never break anyway.
NUMBER = re.compile(r"(?<!\w)\d(?:[\d.,\u00a0\u202f]*\d)?(?:[ \u00a0](?:GB|B)\b)?")


@register.filter
def formula_html(formula: object) -> SafeString:
    """The formula, escaped, with each number (and its unit) in a span that never breaks across lines."""
    text = str(formula)
    parts, start = [], 0
    for match in NUMBER.finditer(text):
        parts.append(conditional_escape(text[start : match.start()]))
        parts.append(format_html('<span class="formula__number">{}</span>', match.group()))
        start = match.end()
    parts.append(conditional_escape(text[start:]))
    return mark_safe("".join(parts))  # noqa: S308 - every part above is escaped

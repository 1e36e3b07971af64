"""`{% load js_text %}`: texts for the progressive-enhancement scripts (static/js/), in data attributes.

The scripts carry no words of their own: every text they show is rendered, translated, by the template
that uses it, with `{name}` placeholders the script fills in.
"""

from __future__ import annotations

import datetime
import html
import json

from django import template
from django.template.base import Node, NodeList, Parser, Token
from django.template.context import Context
from django.utils.html import escape
from django.utils.module_loading import import_string
from django.utils.safestring import SafeString

register = template.Library()

# One sample count per CLDR plural category (what `Intl.PluralRules` answers in the browser), rendered
# through gettext's own plural rule. English, Spanish and French use `one` and `other`; a language with
# more categories (Polish: one, few, many, other) adds a sample for each here.
PLURAL_SAMPLES = {"one": 1, "other": 5}


class _Placeholder(int):
    """A count gettext picks a plural form with, and the template prints as `{n}` for the script."""

    def __str__(self) -> str:
        return "{n}"


def _attribute(value: object) -> SafeString:
    return SafeString(escape(json.dumps(value, ensure_ascii=False)))


@register.filter
def iso_utc(value: datetime.datetime | None) -> str:
    """A moment as `2026-12-02T13:55:03+00:00`: valid in `<time datetime>` (which refuses microseconds) and
    read alike by every browser's `Date.parse`."""
    if not value:
        return ""
    return value.astimezone(datetime.UTC).isoformat(timespec="seconds")


@register.filter
def text_attr(rendered: str) -> SafeString:
    """Translated text (already HTML-escaped by the template) as the value of an HTML attribute."""
    return SafeString(escape(html.unescape(str(rendered)).strip()))


class PluralFormsNode(Node):
    def __init__(self, nodelist: NodeList, name: str) -> None:
        self.nodelist = nodelist
        self.name = name

    def render(self, context: Context) -> str:
        forms = {}
        for category, sample in PLURAL_SAMPLES.items():
            with context.push({self.name: _Placeholder(sample)}):
                forms[category] = html.unescape(self.nodelist.render(context)).strip()
        return _attribute(forms)


@register.tag
def pluralforms(parser: Parser, token: Token) -> PluralFormsNode:
    """`{% pluralforms as n %}{% blocktranslate count lots=n %}...{% endblocktranslate %}{% endpluralforms %}`

    renders `{"one": "{n} lot", "other": "{n} lots"}` (translated, escaped for an attribute): the script
    picks the form with `Intl.PluralRules` and puts its number in place of `{n}`.
    """
    bits = token.split_contents()
    if len(bits) != 3 or bits[1] != "as":
        raise template.TemplateSyntaxError("usage: {% pluralforms as NAME %}...{% endpluralforms %}")
    nodelist = parser.parse(("endpluralforms",))
    parser.delete_first_token()
    return PluralFormsNode(nodelist, bits[2])


@register.simple_tag
def choice_labels(path: str) -> SafeString:
    """`{% choice_labels "payments.models.PaymentStatus" %}`: `{"value": "translated label", ...}`."""
    choices = import_string(path)
    return _attribute({value: str(label) for value, label in choices.choices})

"""`{% load js_text %}`: the texts the templates hand to the scripts, translated and safe in an attribute."""

from __future__ import annotations

import datetime as dt
import html
import json

from django.template import engines
from django.utils import translation

PLURALS = (
    "{% load i18n js_text %}"
    '<p data-forms="{% pluralforms as n %}{% blocktranslate count days=n %}'
    '{{ days }} day{% plural %}{{ days }} days{% endblocktranslate %}{% endpluralforms %}">'
)


def render(source: str, **context) -> str:
    return engines["django"].from_string(source).render(context)


def attribute(rendered: str, name: str) -> str:
    return html.unescape(rendered.split(f'{name}="', 1)[1].split('"', 1)[0])


def test_plural_forms_are_rendered_for_each_category_with_a_placeholder():
    with translation.override("en"):
        forms = json.loads(attribute(render(PLURALS), "data-forms"))

    assert forms == {"one": "{n} day", "other": "{n} days"}


def test_plural_forms_are_translated():
    with translation.override("fr"):
        forms = json.loads(attribute(render(PLURALS), "data-forms"))

    assert forms["one"] != forms["other"]
    assert all("{n}" in form for form in forms.values())
    assert "jour" in forms["other"]


def test_a_translation_with_quotes_stays_inside_its_attribute():
    rendered = render('{% load js_text %}<p data-text="{{ text|text_attr }}">', text='Say "hi" & <go>')

    assert rendered == '<p data-text="Say &quot;hi&quot; &amp; &lt;go&gt;">'


def test_choice_labels_are_the_translated_labels_by_value():
    with translation.override("en"):
        rendered = render("{% load js_text %}<p data-labels=\"{% choice_labels 'payments.models.PaymentStatus' %}\">")

    labels = json.loads(attribute(rendered, "data-labels"))
    assert labels["pending"] == "Waiting for the transfer"
    assert set(labels) >= {"pending", "detected", "confirmed", "underpaid", "overpaid", "late", "rejected"}


def test_times_are_written_to_the_second_in_utc_for_time_elements():
    moment = dt.datetime(2026, 12, 2, 14, 39, 46, 867231, tzinfo=dt.timezone(dt.timedelta(hours=1)))

    assert render("{% load js_text %}{{ moment|iso_utc }}", moment=moment) == "2026-12-02T13:39:46+00:00"
    assert render("{% load js_text %}{{ moment|iso_utc }}", moment=None) == ""

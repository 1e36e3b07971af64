"""Counted words staff read ("1 lot", "7 days"), in the reader's language: one place for their plural forms, written
when a page is rendered (never stored)."""

from __future__ import annotations

from django.utils.translation import npgettext


def lots_text(count: int) -> str:
    return npgettext("staff", "%(count)s lot", "%(count)s lots", count) % {"count": count}


def days_text(count: int) -> str:
    return npgettext("staff", "%(count)s day", "%(count)s days", count) % {"count": count}

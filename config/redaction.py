"""Secrets never reach a log line or an error page: order tokens, API tokens, private keys, URL passwords.

The order page's URL carries its secret token (`/o/<reference>/<token>/`), so a plain access log or a
"Not Found: <path>" warning would leak it; so could a Referer header or a pasted private key.
"""

from __future__ import annotations

import logging
import re

from django.views.debug import SafeExceptionReporterFilter
from gunicorn.glogging import Logger as GunicornLogger

REDACTED = "[redacted]"
PATTERNS = [
    # The order's secret path segment, wherever a URL shows up (path, full URL, Referer).
    (re.compile(r"(/o/[^/\s?#\"']+/)[^/\s?#\"']+"), rf"\1{REDACTED}"),
    (re.compile(r"(X-Order-Token[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+", re.IGNORECASE), rf"\1{REDACTED}"),
    (re.compile(r"((?:Token|Bearer)\s+)[0-9a-zA-Z._-]{20,}"), rf"\1{REDACTED}"),
    (
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL),
        f"{REDACTED} private key",
    ),
    # Passwords inside URLs (a DATABASE_URL or broker URL in an error message).
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s/]+@"), rf"\1{REDACTED}@"),
]


def redact(text: str) -> str:
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFormatter(logging.Formatter):
    """The standard formatter, with the finished line (traceback included) passed through `redact`."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class RedactingGunicornLogger(GunicornLogger):
    """gunicorn's logger with every access-log field redacted (`--logger-class`, see docker-compose.yml)."""

    def atoms(self, resp, req, environ, request_time) -> dict:
        fields = super().atoms(resp, req, environ, request_time)
        return {key: redact(value) if isinstance(value, str) else value for key, value in fields.items()}


class SecretsHidingExceptionReporterFilter(SafeExceptionReporterFilter):
    """Django's debug pages and error reports, also hiding URLs with credentials and the wallet's xpub."""

    hidden_settings = re.compile(r"API|TOKEN|KEY|SECRET|PASS|SIGNATURE|XPUB|DATABASE_URL|BROKER_URL|RPC_URLS", re.I)

    def cleanse_setting(self, key, value):
        value = super().cleanse_setting(key, value)
        return redact(value) if type(value) is str else value  # not lazy objects that pose as str

"""Secrets never reach a log line or an error page: order tokens, API tokens, private keys, URL passwords.

The order page's URL carries its secret token (`/o/<reference>/<token>/`), so a plain access log or a
"Not Found: <path>" warning would leak it; so could a Referer header or a pasted private key.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.views.debug import SafeExceptionReporterFilter
from gunicorn.glogging import Logger as GunicornLogger

if TYPE_CHECKING:
    import datetime as dt

    from gunicorn.http.message import Request
    from gunicorn.http.wsgi import Response

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


# A BIP-39 mnemonic (12 to 24 words of its English list in a row) is the shop's keys: never logged. The list
# ships with bip-utils (a dependency); read as a file, without importing the library.
MNEMONIC_MIN_WORDS = 12
_WORDS_RUN = re.compile(rf"\b[a-z]{{3,8}}(?:\s+[a-z]{{3,8}}){{{MNEMONIC_MIN_WORDS - 1},}}\b")


def _bip39_words() -> frozenset[str]:
    spec = importlib.util.find_spec("bip_utils")
    if spec is None or spec.origin is None:
        return frozenset()
    path = Path(spec.origin).parent / "bip" / "bip39" / "wordlist" / "english.txt"
    return frozenset(path.read_text(encoding="utf-8").split()) if path.exists() else frozenset()


BIP39_WORDS = _bip39_words()


def _mnemonic_redacted(match: re.Match[str]) -> str:
    """Within a run of short lower-case words, each stretch of 12 or more BIP-39 words is redacted."""
    words = re.split(r"(\s+)", match.group(0))
    out: list[str] = []
    stretch: list[str] = []  # the current run of BIP-39 words and the spaces between them

    def flush() -> None:
        kept = [w for w in stretch if not w.isspace()]
        if len(kept) >= MNEMONIC_MIN_WORDS:
            leading = stretch[0] if stretch[0].isspace() else ""
            trailing = stretch[-1] if stretch[-1].isspace() else ""
            out.append(f"{leading}{REDACTED} mnemonic{trailing}")
        else:
            out.extend(stretch)
        stretch.clear()

    for part in words:
        if part.isspace() or part in BIP39_WORDS:
            stretch.append(part)
        else:
            flush()
            out.append(part)
    flush()
    return "".join(out)


def _webhook_path_pattern() -> re.Pattern[str] | None:
    """A chat webhook's URL is its credential (Slack's /services/T../B../secret): its path never reaches a log,
    whoever writes it (urllib3 logs the request line at DEBUG)."""
    url = os.environ.get("STAFF_WEBHOOK_URL", "").strip()
    secret = url[len(urlsplit(url)._replace(path="", query="", fragment="").geturl()) :] if url else ""
    return re.compile(re.escape(secret)) if len(secret) > 1 else None


WEBHOOK_PATH = _webhook_path_pattern()


def redact(text: str) -> str:
    if WEBHOOK_PATH is not None:
        text = WEBHOOK_PATH.sub(f"/{REDACTED}", text)
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return _WORDS_RUN.sub(_mnemonic_redacted, text) if BIP39_WORDS else text


class RedactingFormatter(logging.Formatter):
    """The standard formatter, with the finished line (traceback included) passed through `redact`."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


# gunicorn ships no types (its names are Any: [[tool.mypy.overrides]] ignore_missing_imports), so its base is Any.
class RedactingGunicornLogger(GunicornLogger):  # type: ignore[misc]
    """gunicorn's logger with every access-log field redacted (`--logger-class`, see docker-compose.yml)."""

    def atoms(
        self, resp: Response, req: Request, environ: Mapping[str, object], request_time: dt.timedelta
    ) -> dict[str, object]:
        fields = super().atoms(resp, req, environ, request_time)
        return {key: redact(value) if isinstance(value, str) else value for key, value in fields.items()}


class SecretsHidingExceptionReporterFilter(SafeExceptionReporterFilter):
    """Django's debug pages and error reports, also hiding URLs with credentials and the wallet's xpub."""

    hidden_settings = re.compile(r"API|TOKEN|KEY|SECRET|PASS|SIGNATURE|XPUB|DATABASE_URL|BROKER_URL|RPC_URLS", re.I)

    def cleanse_setting(self, key: int | str, value: object) -> object:
        value = super().cleanse_setting(key, value)
        return redact(value) if type(value) is str else value  # not lazy objects that pose as str

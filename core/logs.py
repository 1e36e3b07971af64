"""Log lines an operator can search: time, level and logger on every line, and the order, network, node and
Celery task the line is about where the code knows them.

`LOG_FORMAT=json` writes one JSON object per line (python-json-logger's JsonFormatter): `time` (UTC, ISO 8601),
`level`, `logger`, `message`, then `order`, `network`, `node`, `task`, `request_id` when known (and an `exc_info`
traceback).
The default human format carries the same, as text. Both pass every string through core.redaction: order
tokens, API tokens, private keys, mnemonics and URL passwords never reach a line.

Where the fields come from: a `logging.Filter` on the handler (core/log_context.py) reads the context
variables `log_context` sets
(the scan per network, the settlement per order, the preparation per order and node; Celery's task name by
the task_prerun/task_postrun signals, connected in config/celery.py; the request's id by core/request_id.py).
A call's own `extra={"order": ...}` wins.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pythonjsonlogger.json import JsonFormatter

from core.log_context import FIELDS
from core.redaction import RedactingFormatter, RedactingGunicornLogger, redact

if TYPE_CHECKING:
    from gunicorn.config import Config as GunicornConfig

HUMAN_FORMAT = "%(asctime)s %(levelname)s %(name)s %(context)s%(message)s"


class HumanFormatter(RedactingFormatter):
    """`2026-12-03 21:00:00,123 INFO payments.scan [network=base task=...] message`, redacted."""

    def __init__(
        self,
        fmt: str | None = None,
        datefmt: str | None = None,
        style: Literal["%", "{", "$"] = "%",
        validate: bool = True,
        *,
        defaults: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(fmt or HUMAN_FORMAT, datefmt, style, validate, defaults=defaults)

    def format(self, record: logging.LogRecord) -> str:
        known = [f"{name}={getattr(record, name)}" for name in FIELDS if getattr(record, name, None) is not None]
        record.context = f"[{' '.join(known)}] " if known else ""
        return super().format(record)


class RedactingJsonFormatter(JsonFormatter):
    """One JSON object per line; every string value redacted before it is serialised (the JSON stays valid)."""

    # Passed through as they come: JsonFormatter's own *args and **kwargs are untyped (BaseJsonFormatter's options).
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("fmt", "%(levelname)s %(name)s %(message)s")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("json_ensure_ascii", False)
        super().__init__(*args, **kwargs)

    def add_fields(
        self, log_data: dict[str, object], record: logging.LogRecord, message_dict: dict[str, object]
    ) -> None:
        log_data["time"] = dt.datetime.fromtimestamp(record.created, tz=dt.UTC).isoformat(timespec="milliseconds")
        super().add_fields(log_data, record, message_dict)
        log_data.pop("context", None)  # the human formatter's, when both handlers see a record

    def process_log_record(self, log_data: dict[str, object]) -> dict[str, object]:
        return {key: _redacted(value) for key, value in log_data.items()}


def _redacted(value: object) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    return value


class GunicornLogger(RedactingGunicornLogger):
    """gunicorn's own error and access logs (its loggers do not propagate to Django's): redacted as before, and
    one JSON object per line under LOG_FORMAT=json (`--logger-class core.logs.GunicornLogger`)."""

    def setup(self, cfg: GunicornConfig) -> None:
        super().setup(cfg)
        if os.environ.get("LOG_FORMAT", "").strip().lower() == "json":
            for handler in [*self.error_log.handlers, *self.access_log.handlers]:
                handler.setFormatter(RedactingJsonFormatter())

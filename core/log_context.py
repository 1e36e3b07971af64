"""What a log line is about: the order, network, node, Celery task and request, kept in context variables.

Set with `log_context(order=..., network=..., node=...)` around the work (the scan per network, the settlement
per order, the preparation per order and node); the Celery task's name by config/celery.py's signals. The
handler's `ContextFilter` copies them onto each record; the formatters (core/logs.py) write them. Kept apart
from the formatters so that config/celery.py, imported with the settings, imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar, Token

FIELDS = ("order", "network", "node", "task", "request_id")
_context: ContextVar[dict[str, str]] = ContextVar("log_context", default={})  # noqa: B039 (never mutated)


@contextlib.contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Within the block, every log line carries these fields (None leaves a field as it was)."""
    known = {name: str(value) for name, value in fields.items() if value is not None and name in FIELDS}
    token = _context.set({**_context.get(), **known})
    try:
        yield
    finally:
        _context.reset(token)


def log_context_set(**fields: object) -> Token[dict[str, str]]:
    """For code that cannot wrap a block (Celery's signals): set, and give the token to `log_context_reset`."""
    known = {name: str(value) for name, value in fields.items() if value is not None and name in FIELDS}
    return _context.set({**_context.get(), **known})


def log_context_reset(token: Token[dict[str, str]]) -> None:
    try:
        _context.reset(token)
    except ValueError:  # set in another context (a signal sent from elsewhere): forget the fields instead
        _context.set({})


class ContextFilter(logging.Filter):
    """Copies the known context onto the record (fields given with `extra=` win). Lets every record through."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in _context.get().items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True

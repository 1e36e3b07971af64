"""The Celery application: `celery -A config worker` and `celery -A config beat`."""

from __future__ import annotations

import logging.config
import os
from contextvars import Token

from celery import Celery, Task, signals
from django.conf import settings

from core.log_context import log_context_reset, log_context_set

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
_task_tokens: dict[str | None, Token[dict[str, str]]] = {}  # task id -> the log context to restore when it ends


@signals.setup_logging.connect
def logging_from_django(**_kwargs: object) -> None:
    """The worker and beat log as Django does (LOG_FORMAT, redaction, the context fields), not Celery's way."""
    logging.config.dictConfig(settings.LOGGING)


@signals.task_prerun.connect
def _log_context_task_start(
    task_id: str | None = None, task: Task[..., object] | None = None, **_kwargs: object
) -> None:
    _task_tokens[task_id] = log_context_set(task=getattr(task, "name", None))


@signals.task_postrun.connect
def _log_context_task_end(task_id: str | None = None, **_kwargs: object) -> None:
    token = _task_tokens.pop(task_id, None)
    if token is not None:
        log_context_reset(token)

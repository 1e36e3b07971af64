"""The Celery application: `celery -A config worker` and `celery -A config beat`."""

from __future__ import annotations

import logging.config
import os

from celery import Celery, signals
from django.conf import settings

from core.log_context import log_context_reset, log_context_set

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
_task_tokens: dict[str, object] = {}  # task id -> the log context to restore when it ends


@signals.setup_logging.connect
def logging_from_django(**_kwargs) -> None:
    """The worker and beat log as Django does (LOG_FORMAT, redaction, the context fields), not Celery's way."""
    logging.config.dictConfig(settings.LOGGING)


@signals.task_prerun.connect
def _log_context_task_start(task_id=None, task=None, **_kwargs) -> None:
    _task_tokens[task_id] = log_context_set(task=getattr(task, "name", None))


@signals.task_postrun.connect
def _log_context_task_end(task_id=None, **_kwargs) -> None:
    token = _task_tokens.pop(task_id, None)
    if token is not None:
        log_context_reset(token)

"""Run as a process of its own (`python -m tests.project.log_lines`) by test_log_format.py: logs as the shop does.

A Celery task run eagerly (so Celery's signals name it) logs inside the context a scan, a settlement and a
preparation set, with secrets in the message and in a traceback; then one line outside any context.
"""

from __future__ import annotations

import logging
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
django.setup()

from config.celery import app  # noqa: E402 (after django.setup: the app reads the settings)
from core.log_context import log_context  # noqa: E402

SECRET_URL = os.environ["LOG_TEST_SECRET_URL"]
BEARER = os.environ["LOG_TEST_BEARER"]
MNEMONIC = os.environ["LOG_TEST_MNEMONIC"]
WEBHOOK_PATH = "/" + os.environ["STAFF_WEBHOOK_URL"].split("/", 3)[3]


@app.task(name="tests.log_lines.pass_task")
def pass_task() -> None:
    log = logging.getLogger("payments.scan")
    with log_context(network="base"):
        log.info("scan pass over %s with Authorization: Bearer %s", SECRET_URL, BEARER)
        with log_context(order="B2-AAAA-BBBB", node="gpu-7"):
            logging.getLogger("provisioning.prepare").warning("treasurer pasted %s", MNEMONIC)
            logging.getLogger("urllib3.connectionpool").info('"POST %s HTTP/1.1" 200 2', WEBHOOK_PATH)
            try:
                raise ConnectionError(f"could not connect to {SECRET_URL}")
            except ConnectionError:
                logging.getLogger("payments.settle").exception("settle failed")


pass_task.apply()
logging.getLogger("shop.placement").info("outside any task", extra={"order": "B2-CCCC-DDDD"})

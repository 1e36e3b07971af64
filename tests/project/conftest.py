"""Fixtures for the project-level tests: a real Redis broker and a real Celery worker process."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.servers import ROOT, server_missing


def clean_environment(**overrides: str) -> dict[str, str]:
    """The current environment without the project's settings variables, plus `overrides`."""
    prefixes = ("DJANGO_", "PAYMENTS_", "EMAIL_", "CHAIN_RPC_URLS_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env.update(overrides)
    return env


@pytest.fixture
def redis_broker(settings) -> str:
    """The configured Redis broker URL, answering a PING; fails under CI=true when it is missing."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        server_missing("Redis (set CELERY_BROKER_URL=redis://...)")
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        server_missing(f"Redis at {url} ({type(exc).__name__})")
    finally:
        client.close()
    return url


def database_url_for_tests() -> str:
    """A DATABASE_URL for the test database pytest-django created, for a process started by the test."""
    from django.db import connection

    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db["HOST"] or "127.0.0.1"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{credentials}@{host}{port}/{quote(db['NAME'], safe='')}"


class Worker:
    def __init__(self, process: subprocess.Popen, log: Path, queue: str) -> None:
        self.process = process
        self.log = log
        self.queue = queue

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture
def celery_worker(require_postgres, redis_broker, tmp_path):
    """A real `celery -A config worker` on its own queue, with the production-like base settings.

    Tasks of this test process go to that queue through Redis (eager mode off) and the worker writes to
    the test database; emails land as files in `tmp_path / "emails"`.
    """
    from config.celery import app

    queue = f"test-{uuid.uuid4().hex[:12]}"
    emails = tmp_path / "emails"
    emails.mkdir()
    log = tmp_path / "worker.log"
    env = clean_environment(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=database_url_for_tests(),
        CELERY_BROKER_URL=redis_broker,
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
        EMAIL_FILE_PATH=str(emails),
        PYTHONUNBUFFERED="1",
    )
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "--pool",
        "solo",
        "--concurrency",
        "1",
        "-Q",
        queue,
        "--hostname",
        f"{queue}@%h",
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        "INFO",
    ]
    previous_eager, previous_routes = app.conf.task_always_eager, app.conf.task_routes
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
    app.conf.task_always_eager = False
    app.conf.update(task_routes={"shop.tasks.*": {"queue": queue}, "payments.tasks.*": {"queue": queue}})
    try:
        yield Worker(process, log, queue)
    finally:
        app.conf.task_always_eager = previous_eager
        app.conf.update(task_routes=previous_routes)
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        import redis

        client = redis.Redis.from_url(redis_broker)
        client.delete(queue)
        client.close()

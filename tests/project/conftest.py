"""Fixtures for the project-level tests: a real Redis broker and a real Celery worker process."""

from __future__ import annotations

import pytest

# Re-exported: other test modules start processes with these.
from tests.servers import celery_worker_on, clean_environment, database_url_for_tests, redis_answering

__all__ = ["clean_environment", "database_url_for_tests"]


@pytest.fixture
def redis_broker(settings) -> str:
    """The configured Redis broker URL, answering a PING; fails under CI=true when it is missing."""
    return redis_answering(settings.CELERY_BROKER_URL)


@pytest.fixture
def celery_worker(db, redis_broker, tmp_path):
    """A real `celery -A config worker` on its own queue, with the production-like base settings.

    Tasks of this test process go to that queue through Redis (eager mode off) and the worker writes to
    the test database; emails land as files in `tmp_path / "emails"`.
    """
    with celery_worker_on(redis_broker, tmp_path) as worker:
        yield worker

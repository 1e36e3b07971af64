"""Fixtures for the fault tests: private servers the test may stop, stopped in `finally` even when it fails."""

from __future__ import annotations

import pytest

from tests.faults.servers import PrivatePostgres, PrivateRedis
from tests.payments.verification.conftest import bare_chain, chain, customer, no_other_networks  # noqa: F401 (fixtures)


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of this test alone: stopping it touches no other test or agent."""
    server = PrivateRedis(tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def private_postgres():
    """A PostgreSQL cluster of this test alone, removed afterwards."""
    server = PrivatePostgres()
    try:
        yield server
    finally:
        server.remove()

"""/healthz answers in seconds when the broker or a network's RPC hangs: a container health check (and an
operator) gets a report, not a timeout."""

from __future__ import annotations

import socket
import time

import pytest


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections (the kernel's backlog) and never answers a byte."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.mark.django_db
def test_health_reports_a_hanging_broker_and_network_within_seconds(
    client, monkeypatch, silent_server, only_local_network
):
    from config.celery import app as celery_app

    # Given a broker and both RPC URLs of the local network that accept connections and never answer
    monkeypatch.setattr(celery_app.conf, "broker_url", f"redis://{silent_server}/0")
    # Celery reads CELERY_BROKER_URL from the environment before its own setting (CI sets it).
    monkeypatch.setenv("CELERY_BROKER_URL", f"redis://{silent_server}/0")
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"http://{silent_server},http://{silent_server}/second")

    # When /healthz is asked
    started = time.monotonic()
    response = client.get("/healthz")
    elapsed = time.monotonic() - started

    # Then it answers 503 within a few seconds, naming what is down and what is not
    assert elapsed < 6, f"/healthz took {elapsed:.1f} s"
    assert response.status_code == 503
    report = response.json()
    assert report["ok"] is False
    assert report["database"] == {"ok": True}
    assert report["broker"]["ok"] is False
    assert report["networks"]["local"]["ok"] is False
    assert report["networks"]["local"]["error"]
    assert "verifier" in report["networks"]["local"]

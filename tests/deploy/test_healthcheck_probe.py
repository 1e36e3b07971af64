"""`python -m config.healthcheck`, the web container's health check: 0 when /healthz answers 200, 1 otherwise.

It must ask as the TLS proxy would, with a Host the settings allow: production refuses 127.0.0.1 as a host
and redirects plain HTTP."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.deploy.settings_env import clean_environment
from tests.servers import ROOT, free_port


def probe(url: str, allowed_hosts: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "config.healthcheck", url],
        cwd=ROOT,
        env=clean_environment(DJANGO_ALLOWED_HOSTS=allowed_hosts),
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def health_server():
    """A stand-in web process: /healthz answers `status`, and the requests' headers are kept."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server API
            server.seen.append(dict(self.headers))
            self.send_response(server.status if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.seen, server.status = [], 200
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_probe_passes_when_healthz_answers_200_and_asks_as_the_proxy_would(health_server):
    checked = probe(f"http://127.0.0.1:{health_server.server_port}/healthz", ".shop.example.org,admin.example.org")

    assert checked.returncode == 0, checked.stderr
    assert health_server.seen[0]["Host"] == "shop.example.org"
    assert health_server.seen[0]["X-Forwarded-Proto"] == "https"


def test_the_probe_fails_when_healthz_answers_503(health_server):
    health_server.status = 503

    checked = probe(f"http://127.0.0.1:{health_server.server_port}/healthz", "shop.example.org")

    assert checked.returncode == 1
    assert "503" in checked.stderr


def test_the_probe_fails_when_nothing_answers():
    checked = probe(f"http://127.0.0.1:{free_port()}/healthz", "shop.example.org")

    assert checked.returncode == 1
    assert "healthcheck:" in checked.stderr


def test_the_probe_refuses_a_url_that_is_not_http():
    assert probe("ftp://shop.example.org/healthz", "shop.example.org").returncode == 2

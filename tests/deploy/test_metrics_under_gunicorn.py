"""/metrics under gunicorn with several workers: whichever worker answers the scrape, it counts every worker's
requests (prometheus-client's multi-process mode, set up by config/gunicorn.py)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.metrics_scrape import parse, value
from tests.project.conftest import clean_environment, database_url_for_tests
from tests.servers import ROOT, free_port

WORKERS = 3
REQUESTS = 12


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - a loopback URL of the test's own
        return response.read().decode()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_every_scrape_counts_the_requests_of_every_gunicorn_worker(tmp_path):
    port = free_port()
    folder = tmp_path / "multiproc"
    folder.mkdir()
    (folder / "counter_999999.db").write_bytes(b"left by a previous run")  # emptied when gunicorn starts
    env = clean_environment(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DATABASE_URL=database_url_for_tests(),
        PROMETHEUS_MULTIPROC_DIR=str(folder),
    )
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "python:config.gunicorn"]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", str(WORKERS)]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(f"{base}/healthz")
                break
            except urllib.error.HTTPError:
                break  # answered (a 503 without a broker is still an answer)
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not answer"
                time.sleep(0.2)

        # When many requests reach the workers (the kernel spreads the connections among them)
        for _ in range(REQUESTS):
            get(f"{base}/terms/")

        # Then every scrape, whichever worker answers it, counts all of them
        for _ in range(5):
            samples = parse(get(f"{base}/metrics"))
            assert value(samples, "http_request_duration_seconds_count", view="shop:terms") == REQUESTS
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert not (folder / "counter_999999.db").exists()

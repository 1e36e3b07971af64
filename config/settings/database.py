"""The database engine: PostgreSQL, and nothing else."""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

POSTGRES_SCHEMES = {"postgres", "postgresql", "pgsql"}


def refuse_other_engines(url: str) -> None:
    """Stop at start, in one line and without a traceback, when DATABASE_URL names another engine: the money
    rests on PostgreSQL's row locks, advisory locks and triggers (docs/decisions.md)."""
    scheme = urlsplit(url).scheme.lower() or "no scheme"
    if scheme in POSTGRES_SCHEMES:
        return
    print(  # noqa: T201 - before logging exists: the one line the operator reads
        f"DATABASE_URL names {scheme}: this shop runs on PostgreSQL only. Set DATABASE_URL=postgres://USER@HOST:PORT/NAME,"
        " or leave it unset for the embedded PostgreSQL that `make run` starts.",
        file=sys.stderr,
    )
    raise SystemExit(2)

"""Programs that run ON a GPU node: standard library only, never Django, copied there by a driver.

A caller puts `source("access.py")` into the driver's workdir, then runs
`[node.python, "access.py", "grant", ...]` there (see the program's docstring for its commands).
"""

from __future__ import annotations

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent


def source(name: str) -> bytes:
    """The bytes of a node tool (e.g. "access.py"), to put on the node."""
    path = DIRECTORY / name
    if path.parent != DIRECTORY or not path.is_file():
        raise FileNotFoundError(f"no node tool named {name!r}")
    return path.read_bytes()

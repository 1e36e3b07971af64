"""What every benchmark shares: the results file (with the date and the core count) and markdown tables."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# BENCH_RESULTS_DIR: elsewhere than the committed results (the smoke tests write there).
RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR") or ROOT / "bench" / "results")


def machine() -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def write_results(name: str, results: dict[str, Any]) -> Path:
    """bench/results/<name>.json: the figures, with when and on how many cores they were measured."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({**machine(), **results}, indent=2, default=str) + "\n")
    return path


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)

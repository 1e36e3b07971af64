"""gunicorn's settings file (`gunicorn -c python:config.gunicorn`): prometheus-client's multi-process mode.

Each gunicorn worker writes its request histograms to files in PROMETHEUS_MULTIPROC_DIR and /metrics adds them
up, whichever worker answers. The master empties the folder when it starts (the files of a previous run would
be counted again) and forgets a worker that exits.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import multiprocess

if TYPE_CHECKING:
    from gunicorn.arbiter import Arbiter
    from gunicorn.workers.base import Worker


def on_starting(server: Arbiter) -> None:
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        Path(folder).mkdir(parents=True)


def child_exit(server: Arbiter, worker: Worker) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]  # prometheus-client: unannotated

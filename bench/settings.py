"""The production settings, plus what only a benchmark run needs: the baseline view's URLconf, the static
files collected into the run's own folder, and the run's own Celery queue (never the shared default one).

Selected by `bench/load.py` with DJANGO_SETTINGS_MODULE=bench.settings; never used by the shop itself.
"""

from __future__ import annotations

import os

from config.settings.production import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
STATIC_ROOT = os.environ["BENCH_STATIC_ROOT"]
CELERY_TASK_DEFAULT_QUEUE = os.environ["BENCH_QUEUE"]

"""Beat's scheduler: Celery's own, which first makes the folder its state file goes in (a run folder that a
fresh checkout or container does not have yet)."""

from __future__ import annotations

from pathlib import Path

from celery.beat import PersistentScheduler


class RunFolderScheduler(PersistentScheduler):
    schedule_filename: str  # set by PersistentScheduler.__init__ (celery-types leaves it out)

    def setup_schedule(self) -> None:
        Path(self.schedule_filename).parent.mkdir(parents=True, exist_ok=True)
        super().setup_schedule()

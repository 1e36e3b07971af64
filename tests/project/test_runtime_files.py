"""Nothing is written into the checkout at run time: beat started in it keeps its state in a run folder (made
when missing), and the browser suite writes the docs' screenshots only when asked for."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from tests.browser import checks
from tests.servers import clean_environment

ROOT = Path(__file__).resolve().parents[2]


def test_beat_started_in_the_checkout_keeps_its_state_in_the_run_folder(tmp_path):
    # Given a run folder that does not exist yet, and what the checkout's root holds before
    state = tmp_path / "run" / "beat" / "celerybeat-schedule"
    before = set(ROOT.glob("celerybeat-schedule*"))
    env = clean_environment(
        CELERY_BEAT_SCHEDULE_FILENAME=str(state),
        CELERY_BROKER_URL="redis://127.0.0.1:9/0",  # nothing listens: beat keeps its state, sends nothing
        DJANGO_SETTINGS_MODULE="config.settings.base",
    )
    # When beat starts in the checkout's root, as a newcomer would start it
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO", "--pidfile", ""],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(state.parent.glob("celerybeat-schedule*")) and time.monotonic() < deadline:
            assert beat.poll() is None, beat.stdout.read()
            time.sleep(0.2)
    finally:
        beat.terminate()
        output = beat.communicate(timeout=30)[0]
    # Then its state is in the run folder, which it made, and the checkout's root gained nothing
    assert list(state.parent.glob("celerybeat-schedule*")), output
    assert set(ROOT.glob("celerybeat-schedule*")) == before


def test_the_default_run_folder_is_inside_the_checkout_and_ignored_by_git():
    default = Path(settings.CELERY_BEAT_SCHEDULE_FILENAME)
    assert default.parent == ROOT / ".run"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(default)], cwd=ROOT, check=False)
    assert ignored.returncode == 0


def test_the_browser_suite_writes_the_docs_screenshots_only_when_asked_for(tmp_path, monkeypatch):
    class Page:
        """What PageChecks asks of a Playwright page: each check looks at it at 1280 px, on a phone, in dark mode."""

        url = "http://127.0.0.1/"
        viewport_size = checks.VIEWPORT

        def wait_for_load_state(self, state):
            pass

        def set_viewport_size(self, size):
            self.viewport_size = size

        def emulate_media(self, color_scheme):
            pass

        def evaluate(self, script):
            return {"width": self.viewport_size["width"], "culprits": []} if "culprits" in script else False

        def screenshot(self, path, full_page):
            Path(path).write_bytes(b"png")

        def content(self):
            return "<html></html>"

    monkeypatch.setattr(checks, "axe_violations", lambda page: "")
    docs = tmp_path / "docs-screenshots"
    monkeypatch.setattr(checks, "DOCS_SCREENSHOTS", docs)

    checks.PageChecks(html_dir=tmp_path / "html")(Page(), "en-01-home")
    assert (tmp_path / "html" / "en-01-home.png").exists() and not docs.exists()

    monkeypatch.setattr(checks, "WRITE_DOCS_SCREENSHOTS", True)
    checks.PageChecks(html_dir=tmp_path / "html")(Page(), "en-01-home")
    assert (docs / "en-01-home.png").exists()
    # docs/ keeps the phone and dark variants of the payment pages only; the others stay beside the HTML
    assert not (docs / "en-01-home-390.png").exists() and (tmp_path / "html" / "en-01-home-390-dark.png").exists()
    checks.PageChecks(html_dir=tmp_path / "html")(Page(), "en-08-order")
    assert {p.name for p in docs.glob("en-08-order*")} == {
        "en-08-order.png",
        "en-08-order-390.png",
        "en-08-order-390-dark.png",
    }

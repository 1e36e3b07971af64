"""What every page of the journey goes through: a screenshot, axe-core (accessibility) and, once per module,
the Nu HTML checker (vnu.jar) over the HTML the browser rendered."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.servers import ROOT, server_missing

CHROMIUM = Path("/usr/bin/chromium")  # Debian's chromium; Playwright never downloads a browser here
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
VNU = ROOT / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"
# The docs' screenshots are rewritten only when asked for (`make screenshots`): a test run leaves the checkout
# as it was (its pages' screenshots go beside their saved HTML, in a temporary folder).
DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"
WRITE_DOCS_SCREENSHOTS = os.environ.get("SCREENSHOTS") == "docs"
VIEWPORT = {"width": 1280, "height": 900}
BLOCKING_IMPACTS = ("serious", "critical")


def chromium_missing() -> None:
    if not CHROMIUM.exists():
        server_missing(f"chromium ({CHROMIUM}: Debian's chromium package; .ci/run installs it)")


def axe_missing() -> None:
    if not AXE.exists():
        server_missing("axe-core (npm devDependency; `make test` installs it)")


def vnu_missing() -> None:
    if not VNU.exists():
        server_missing("vnu-jar (npm devDependency; `make test` installs it)")
    if shutil.which("java") is None:
        server_missing("java (the Nu HTML checker runs on it)")


@dataclass
class PageChecks:
    """Screenshots, axe-core on each page as it is shown, and the rendered HTML kept for the Nu checker.

    Findings are collected, not raised on the spot: the journey goes on, and the module's last tests report
    every page's findings at once."""

    html_dir: Path
    pages: dict[Path, str] = field(default_factory=dict)  # saved HTML -> the page's URL
    axe_checked: list[str] = field(default_factory=list)
    axe_findings: dict[str, str] = field(default_factory=dict)  # page name -> its serious/critical violations

    def __call__(self, page, name: str) -> None:
        """`name` is `<lang>-<nn>-<step>`: the screenshot's and the saved HTML's name."""
        page.wait_for_load_state("load")
        folder = DOCS_SCREENSHOTS if WRITE_DOCS_SCREENSHOTS else self.html_dir
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
        html = self.html_dir / f"{name}.html"
        html.write_text(page.content(), encoding="utf-8")
        self.pages[html] = page.url
        self.axe_checked.append(name)
        violations = axe_violations(page)
        if violations:
            self.axe_findings[name] = f"{page.url}\n{violations}"

    def failure(self, page, name: str) -> None:
        """Keep what the browser showed when the journey failed (beside the rendered pages, not in docs/)."""
        with contextlib.suppress(Exception):
            page.screenshot(path=str(self.html_dir / f"{name}.png"), full_page=True)
            (self.html_dir / f"{name}.html").write_text(page.content(), encoding="utf-8")
            print(f"the page when the journey failed ({page.url}): {self.html_dir / name}.png and .html")


def axe_violations(page) -> str:
    """The serious and critical violations axe-core finds on the page, one readable block each ('' if none)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    lines = []
    for violation in results["violations"]:
        if violation.get("impact") not in BLOCKING_IMPACTS:
            continue
        lines.append(f"- [{violation['impact']}] {violation['id']}: {violation['help']} ({violation['helpUrl']})")
        for node in violation["nodes"][:10]:
            target = " ".join(str(part) for part in node["target"])
            lines.append(f"    {target}: {node.get('failureSummary', '').strip().replace(chr(10), ' ')}")
            lines.append(f"      {node['html'][:300]}")
    return "\n".join(lines)


def vnu_errors(files: dict[Path, str]) -> str:
    """The Nu HTML checker's errors over the saved pages ('' if none): one entry per kind of error, with the
    pages and lines where it occurs and one extract."""
    result = subprocess.run(
        ["java", "-jar", str(VNU), "--format", "json", "--stdout", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        messages = json.loads(result.stdout)["messages"]
    except (ValueError, KeyError):
        pytest.fail(f"vnu.jar gave no JSON report (exit {result.returncode}):\n{result.stdout}\n{result.stderr}")
    kinds: dict[str, list[str]] = {}
    extracts: dict[str, str] = {}
    for message in messages:
        if message.get("type") not in ("error", "non-document-error"):
            continue
        kind = re.sub(r"“[^”]*”", "“…”", message.get("message", ""), count=1)
        page = Path(message.get("url", "").removeprefix("file:")).stem
        kinds.setdefault(kind, []).append(f"{page}:{message.get('lastLine', '?')}")
        extracts.setdefault(kind, " ".join(message.get("extract", "").split()))
    return "\n".join(
        f"- {kind} ({len(where)}×)\n    at {', '.join(where)}\n    e.g. {extracts[kind]}"
        for kind, where in kinds.items()
    )

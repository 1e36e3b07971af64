"""What every page of the journey goes through, as shown at 1280 px, on a phone (390×844) and on a phone in
dark mode: a screenshot and axe-core (accessibility) in each, whether the phone has to scroll sideways, and,
once per module, the Nu HTML checker (vnu.jar) over the HTML the browser rendered."""

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
# docs/ keeps every page at 1280 px, and the phone and dark variants only of the pages where a phone matters
# most (the payment card): three images of every page would triple docs/screenshots for little.
DOCS_PHONE_PAGES = ("-08-order", "-order-01-phone-card")
VIEWPORT = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}  # an iPhone 12 to 15 in CSS pixels: the phone
# Each page as a desktop shows it, as a phone shows it, and as a phone in dark mode shows it: the suffix names
# the variant's screenshot and findings.
VARIANTS = (("", VIEWPORT, "light"), ("-390", PHONE, "light"), ("-390-dark", PHONE, "dark"))
BLOCKING_IMPACTS = ("serious", "critical")
# Two frames, so that a new viewport or colour scheme is laid out; a page that renders no frame (Chromium stops
# requestAnimationFrame for a page it considers hidden) goes on after half a second instead of waiting forever:
# `page.evaluate` has no timeout of its own.
NEXT_FRAME = """() => new Promise(done => {
  requestAnimationFrame(() => requestAnimationFrame(done));
  setTimeout(done, 500);
})"""
# axe-core's run, bounded for the same reason: a stuck run fails the check instead of hanging the suite.
AXE_RUN = """async () => await Promise.race([
  axe.run(document, {resultTypes: ['violations']}),
  new Promise((_, fail) => setTimeout(() => fail(new Error('axe-core ran for over 60 s')), 60000)),
])"""
# The outermost elements that stick out past the phone's right edge (outside any box that scrolls them itself):
# what makes the whole page scroll sideways.
WIDER_THAN_THE_VIEWPORT = """() => {
  const edge = document.documentElement.clientWidth + 1;
  const scrolls = el => el !== document.documentElement && el !== document.body
    && ["auto", "scroll", "hidden", "clip"].includes(getComputedStyle(el).overflowX);
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + [...el.classList].map(c => "." + c).join("");
  const found = [];
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.right <= edge || box.width === 0) continue;
    if (el.parentElement.getBoundingClientRect().right > edge) continue;
    let inside = false;
    for (let up = el.parentElement; up; up = up.parentElement) if (scrolls(up)) { inside = true; break; }
    if (!inside) found.push(`${name(el)} (right edge at ${Math.round(box.right)} px)`);
  }
  return {width: document.documentElement.scrollWidth, culprits: found.slice(0, 8)};
}"""


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
        """`name` is `<lang>-<nn>-<step>`: the screenshots' (`<name>.png`, `<name>-390.png`,
        `<name>-390-dark.png`) and the saved HTML's name. The page is shown in each variant in place (no reload:
        a new viewport or colour scheme lays it out again) and left as it was, for the journey to go on."""
        page.wait_for_load_state("load")
        folder = DOCS_SCREENSHOTS if WRITE_DOCS_SCREENSHOTS else self.html_dir
        folder.mkdir(parents=True, exist_ok=True)
        html = self.html_dir / f"{name}.html"
        html.write_text(page.content(), encoding="utf-8")  # one copy for the Nu checker: the HTML is the same
        self.pages[html] = page.url
        viewport = page.viewport_size
        scheme = "dark" if page.evaluate("() => matchMedia('(prefers-color-scheme: dark)').matches") else "light"
        try:
            for suffix, size, color_scheme in VARIANTS:
                self._check_variant(page, f"{name}{suffix}", folder, size, color_scheme)
        finally:
            page.set_viewport_size(viewport)
            page.emulate_media(color_scheme=scheme)
            page.evaluate(NEXT_FRAME)

    def _check_variant(self, page, name: str, folder: Path, size: dict, color_scheme: str) -> None:
        if page.viewport_size != size:
            page.set_viewport_size(size)
        page.emulate_media(color_scheme=color_scheme)
        page.evaluate(NEXT_FRAME)
        if size == PHONE and color_scheme == "light":  # dark mode lays the page out the same
            wide = page.evaluate(WIDER_THAN_THE_VIEWPORT)
            if wide["width"] > PHONE["width"] + 1:
                culprits = "".join(f"\n    {culprit}" for culprit in wide["culprits"])
                self.axe_findings[f"{name} wider than the phone"] = (
                    f"{page.url}\n- the page is {wide['width']} px wide on a {PHONE['width']} px phone "
                    f"(it scrolls sideways); sticking out:{culprits}"
                )
        if folder == DOCS_SCREENSHOTS and size != VIEWPORT and not any(p in name for p in DOCS_PHONE_PAGES):
            folder = self.html_dir
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
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
    results = page.evaluate(AXE_RUN)
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


def axe_clean(page_checks: PageChecks, walk: str) -> None:
    """A module's last word on axe-core: every serious or critical finding on the pages its `walk` showed."""
    if not page_checks.axe_checked:
        server_missing(f"{walk} in this module (they did not run)")
    report = "\n".join(f"{name}: {found}" for name, found in page_checks.axe_findings.items())
    if report:
        pytest.fail(f"axe-core found serious or critical violations:\n{report}", pytrace=False)


def nu_clean(page_checks: PageChecks, walk: str) -> None:
    """The Nu HTML checker over the HTML of every page the module's `walk` rendered, in one run."""
    vnu_missing()
    if not page_checks.pages:
        server_missing(f"{walk} in this module (they did not run)")
    errors = vnu_errors(page_checks.pages)
    if errors:
        pytest.fail(f"the Nu HTML checker found errors:\n{errors}", pytrace=False)

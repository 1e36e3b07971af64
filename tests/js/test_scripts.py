"""The shop's scripts (static/js/): valid syntax, and their helpers' behaviour under Node's test runner.

Node.js is a prerequisite of `make test` (anvil comes from npm); without it these tests skip, and fail
with CI=true."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.servers import ROOT, server_missing

SCRIPTS = sorted((ROOT / "static" / "js").glob("*.js"))


@pytest.fixture(scope="module")
def node() -> str:
    path = shutil.which("node")
    if path is None:
        server_missing("Node.js (node)")
    return path


def test_there_are_scripts():
    assert {path.name for path in SCRIPTS} >= {"site.js", "order-configure.js", "order-status.js"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_script_parses(node, script):
    checked = subprocess.run([node, "--check", str(script)], capture_output=True, text=True, timeout=60)

    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_no_script_carries_words_of_its_own(script):
    """Texts come from the templates (translated): a string literal of two words or more is a leak (class
    lists, selectors and formats, with their dashes, brackets and braces, are not words)."""
    code = re.sub(r"^\s*(//|/?\*).*$", "", script.read_text(), flags=re.M)  # comments are not shown
    literals = re.findall(r"\"([^\"\n]*)\"|'([^'\n]*)'|`([^`\n]*)`", code)
    texts = [text for groups in literals for text in groups if not re.search(r"[-_.\[\]:=#(){}$/]", text)]
    words = [text for text in texts if re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", text) and text != "use strict"]

    assert words == []


def test_the_helpers_behave(node):
    tested = subprocess.run(
        [node, "--test", *sorted(str(path) for path in (ROOT / "tests" / "js").glob("*.test.cjs"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]

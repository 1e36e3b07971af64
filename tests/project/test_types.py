"""mypy holds the code to mypy-baseline.json, which only shrinks (scripts/mypy_baseline.py, in `make lint`).

The comparison is checked on made-up mypy output (fast); one test runs the script on the tree as `make lint` does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from scripts import mypy_baseline
from scripts.mypy_baseline import compare, count, dump_baseline, parse

ROOT = Path(__file__).resolve().parents[2]

OUTPUT = """\
orders/outbox.py:30: error: Missing type parameters for generic type "dict"  [type-arg]
orders/outbox.py:43: error: Missing type parameters for generic type "dict"  [type-arg]
orders/outbox.py:44:12: error: Returning Any from function declared to return "int"  [no-any-return]
orders/outbox.py:44: note: See https://mypy.readthedocs.io/en/stable/_refs.html#code-no-any-return
payments/scan.py:7: error: invalid syntax
shop/views.py:249: error: Incompatible return value type (got "str | None", expected "str")  [return-value]
Found 5 errors in 3 files (checked 3 source files)
"""
COUNTS = {
    "orders/outbox.py": {"no-any-return": 1, "type-arg": 2},
    "payments/scan.py": {"(no code)": 1},
    "shop/views.py": {"return-value": 1},
}


def test_mypy_output_is_counted_by_file_and_code_without_notes_or_summary():
    errors = parse(OUTPUT)

    assert len(errors) == 5
    assert (errors[2].file, errors[2].line, errors[2].code) == ("orders/outbox.py", 44, "no-any-return")
    assert count(errors) == COUNTS


def test_the_same_errors_pass():
    comparison = compare(COUNTS, COUNTS)

    assert comparison.ok
    assert (comparison.grown, comparison.shrunk) == ([], [])


def test_one_more_error_of_a_code_fails():
    found = {**COUNTS, "orders/outbox.py": {"no-any-return": 1, "type-arg": 3}}

    comparison = compare(found, COUNTS)

    assert not comparison.ok
    assert [c.describe() for c in comparison.grown] == ["orders/outbox.py [type-arg]: 3, the baseline allows 2"]


def test_a_new_code_in_a_file_fails_even_when_the_file_has_fewer_errors_overall():
    found = {**COUNTS, "orders/outbox.py": {"arg-type": 1}}

    comparison = compare(found, COUNTS)

    assert [(c.file, c.code, c.allowed, c.found) for c in comparison.grown] == [("orders/outbox.py", "arg-type", 0, 1)]
    assert {c.code for c in comparison.shrunk} == {"no-any-return", "type-arg"}


def test_a_new_file_with_errors_fails():
    found = {**COUNTS, "payments/quotes.py": {"arg-type": 1}}

    comparison = compare(found, COUNTS)

    assert [c.describe() for c in comparison.grown] == ["payments/quotes.py [arg-type]: 1 new (not in the baseline)"]


def test_fewer_errors_and_a_file_without_any_left_pass_and_are_listed():
    found = {"orders/outbox.py": {"type-arg": 1}, "shop/views.py": {"return-value": 1}}

    comparison = compare(found, COUNTS)

    assert comparison.ok
    assert [(c.file, c.code, c.allowed, c.found) for c in comparison.shrunk] == [
        ("orders/outbox.py", "no-any-return", 1, 0),
        ("orders/outbox.py", "type-arg", 2, 1),
        ("payments/scan.py", "(no code)", 1, 0),
    ]


@pytest.fixture
def mypy_says(monkeypatch):
    """Replaces the mypy run of scripts/mypy_baseline.py with the output given."""

    def say(output: str, status: int = 1) -> None:
        monkeypatch.setattr(mypy_baseline, "run_mypy", lambda extra_args: (status, output))

    return say


def test_the_script_fails_on_growth_and_shows_the_errors_that_grew(mypy_says, tmp_path, capsys):
    baseline = tmp_path / "mypy-baseline.json"
    baseline.write_text(dump_baseline({**COUNTS, "orders/outbox.py": {"no-any-return": 1, "type-arg": 1}}))
    mypy_says(OUTPUT)

    assert mypy_baseline.main(["--baseline", str(baseline)]) == 1

    out = capsys.readouterr().out
    assert "orders/outbox.py [type-arg]: 2, the baseline allows 1" in out
    assert 'orders/outbox.py:43: Missing type parameters for generic type "dict"  [type-arg]' in out
    assert "beyond mypy-baseline.json" in out


def test_the_script_passes_on_shrinking_and_says_what_shrank(mypy_says, tmp_path, capsys):
    baseline = tmp_path / "mypy-baseline.json"
    baseline.write_text(dump_baseline({**COUNTS, "shop/views.py": {"return-value": 2}}))
    mypy_says(OUTPUT)

    assert mypy_baseline.main(["--baseline", str(baseline)]) == 0

    out = capsys.readouterr().out
    assert "shop/views.py [return-value]: 1, the baseline allows 2" in out
    assert "--update" in out


def test_update_writes_what_shrank(mypy_says, tmp_path):
    baseline = tmp_path / "mypy-baseline.json"
    baseline.write_text(dump_baseline({**COUNTS, "shop/views.py": {"return-value": 2}, "gone.py": {"misc": 1}}))
    mypy_says(OUTPUT)

    assert mypy_baseline.main(["--baseline", str(baseline), "--update"]) == 0

    assert json.loads(baseline.read_text()) == COUNTS


def test_update_refuses_to_let_the_baseline_grow_unless_told(mypy_says, tmp_path, capsys):
    baseline = tmp_path / "mypy-baseline.json"
    smaller = dump_baseline({**COUNTS, "shop/views.py": {}})
    baseline.write_text(smaller)
    mypy_says(OUTPUT)

    assert mypy_baseline.main(["--baseline", str(baseline), "--update"]) == 1
    assert baseline.read_text() == smaller
    assert "only shrinks" in capsys.readouterr().out

    assert mypy_baseline.main(["--baseline", str(baseline), "--update", "--allow-growth"]) == 0
    assert json.loads(baseline.read_text()) == COUNTS


def test_a_mypy_that_fails_without_errors_fails_the_script(mypy_says, tmp_path, capsys):
    mypy_says("pyproject.toml: [mypy]: unknown option\n", status=2)

    assert mypy_baseline.main(["--baseline", str(tmp_path / "mypy-baseline.json")]) == 2
    assert "unknown option" in capsys.readouterr().err


def test_the_order_domain_and_payments_are_checked_strictly():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in config["overrides"] if set(o["module"]) >= {"orders.*", "payments.*"}]

    assert len(strict) == 1
    flags = (
        "disallow_untyped_defs",
        "disallow_incomplete_defs",
        "check_untyped_defs",
        "disallow_any_generics",
        "warn_return_any",
        "warn_unused_ignores",
        "strict_equality",
        "no_implicit_optional",
    )
    assert {flag: strict[0].get(flag) for flag in flags} == dict.fromkeys(flags, True)


def test_the_tree_is_within_its_mypy_baseline():
    """`make lint`'s check, on the tree as it is: about 5 s with mypy's cache (.mypy_cache), a minute without."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "scripts/mypy_baseline.py"], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, f"{result.stdout}{result.stderr}"
    assert time.monotonic() - started < 300


def test_make_lint_make_check_and_make_test_run_the_check():
    for target in ("lint", "check", "test"):
        # What make would run, prerequisites included (make test runs make lint first), without running it.
        planned = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        assert "scripts/mypy_baseline.py" in planned, f"make {target} does not run the mypy baseline check"

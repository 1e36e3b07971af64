"""The packages are floors (pyproject.toml's import contracts, run by `make lint`): a module that imports a
package above its own fails the check, whichever module it is, a new one included, without being named in
the contracts. Checked on a copy of the code with one wrong import added."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Top to bottom; provisioning and payments are siblings on one floor (neither imports the other).
FLOORS = ["config", "shop", "provisioning", "payments", "orders", "fleet", "core"]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy_of_the_code(into: Path) -> Path:
    for package in FLOORS:
        shutil.copytree(ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    return into


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
    )


def test_the_floors_hold_on_the_code_as_it_is(tmp_path):
    result = _lint(_copy_of_the_code(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("new_module", "imports"),
    [
        ("core/new_helper.py", "orders.models"),  # a building block reaching the order domain
        ("fleet/new_rule.py", "provisioning.states"),  # the nodes' rows reaching the process above them
        ("orders/new_rule.py", "payments.models"),  # the order domain reaching money
        ("payments/new_step.py", "provisioning.models"),  # money reaching machines
        ("provisioning/new_step.py", "payments.models"),  # machines reaching money: siblings, neither imports the other
        ("provisioning/new_step.py", "shop.catalog"),  # machines reaching the storefront
        ("shop/new_page.py", "config.urls"),  # the storefront reaching the top
    ],
)
def test_a_new_module_importing_upwards_fails_the_lint(tmp_path, new_module, imports):
    tree = _copy_of_the_code(tmp_path)
    (tree / new_module).write_text(f"import {imports}  # an upward import\n")
    result = _lint(tree)
    assert result.returncode != 0, result.stdout
    importer = new_module.removesuffix(".py").replace("/", ".")
    assert f"{importer} -> {imports}" in result.stdout

"""The preflight runs on a node with only the standard library and PyTorch: it never imports the project.

It must not import Django, nor anything of the project outside `provisioning/preflight/`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import ROOT

PACKAGE = ROOT / "provisioning" / "preflight"
ALLOWED = set(sys.stdlib_module_names) | {"torch", "provisioning"}


def imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_every_module_of_the_preflight_imports_only_the_standard_library_torch_and_itself():
    offending = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in imported_modules(path):
            top = name.split(".")[0]
            inside = name == "provisioning.preflight" or name.startswith("provisioning.preflight.")
            if top not in ALLOWED or (top == "provisioning" and not inside):
                offending.setdefault(str(path.relative_to(ROOT)), []).append(name)
    assert offending == {}


@pytest.mark.usefixtures("require_torch")
def test_importing_the_whole_preflight_loads_no_django_and_no_other_part_of_the_project():
    code = (
        "import sys\n"
        "import provisioning.preflight.cli, provisioning.preflight.worker, provisioning.preflight.launcher\n"
        "project = ('django', 'rest_framework', 'config', 'shop', 'payments', 'celery')\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in project\n"
        "          or (m.startswith('provisioning.') and not m.startswith('provisioning.preflight'))]\n"
        "print(sorted(loaded))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"

"""`make run`: PyTorch's CPU build and numpy in this venv, for the development nodes' preflight on this CPU.

Nothing is installed when torch and numpy already import (whatever their build: a torch someone installed on
purpose is kept). Otherwise pip resolves the requirements from its configured index without installing
(`--dry-run --report`): a resolution without CUDA packages is a CPU build (a local wheel or index that the
machine provides, as `make test` gets here; PyPI on macOS) and is installed as resolved; anything else comes
from PyTorch's own CPU index (`--cpu-index-url`), never the multi-GB CUDA build.

    python scripts/cpu_torch.py --cpu-index-url URL torch==VERSION numpy
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

PIP = [sys.executable, "-m", "pip"]
# Packages that only a CUDA build of torch pulls in.
CUDA_PREFIXES = ("nvidia-", "triton")
PROBE = "import numpy, torch; print(torch.__version__, 'CUDA ' + torch.version.cuda if torch.version.cuda else 'CPU')"


def importable_torch() -> str | None:
    """'<version> CPU' (or 'CUDA x.y') when torch and numpy import in this venv, else None."""
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    return probe.stdout.strip() if probe.returncode == 0 else None


def is_cpu_build(report: dict) -> bool:
    """True when pip's resolution holds torch and nothing that only its CUDA build needs."""
    installs = [(item["metadata"]["name"].lower(), item["metadata"]["version"]) for item in report.get("install", [])]
    torch_versions = [version for name, version in installs if name == "torch"]
    cuda_packages = [name for name, _ in installs if name.startswith(CUDA_PREFIXES)]
    return bool(torch_versions) and not cuda_packages and "+cu" not in torch_versions[0]


def resolution(requirements: list[str]) -> dict | None:
    """What pip would install from its configured index (metadata only, nothing downloaded in full where the
    index serves it); None when it cannot resolve them."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.json"
        resolved = subprocess.run(
            [*PIP, "install", "--quiet", "--dry-run", "--report", str(path), *requirements],
            capture_output=True,
            text=True,
        )
        return json.loads(path.read_text()) if resolved.returncode == 0 and path.exists() else None


def install(requirements: list[str], cpu_index_url: str) -> int:
    plan = resolution(requirements)
    if plan is not None and is_cpu_build(plan):
        print("cpu_torch: installing PyTorch's CPU build as the configured index resolves it")
        return subprocess.run([*PIP, "install", "--quiet", *requirements]).returncode
    print(f"cpu_torch: the configured index offers no CPU build of torch; installing it from {cpu_index_url}")
    torch = [requirement for requirement in requirements if requirement.lower().startswith("torch")]
    others = [requirement for requirement in requirements if requirement not in torch]
    done = subprocess.run([*PIP, "install", "--quiet", "--index-url", cpu_index_url, *torch])
    if done.returncode != 0 or not others:
        return done.returncode
    return subprocess.run([*PIP, "install", "--quiet", *others]).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-index-url", required=True, help="PyTorch's CPU wheel index, the fallback")
    parser.add_argument("requirements", nargs="+", help="e.g. torch==2.13.0 numpy")
    options = parser.parse_args(argv)

    found = importable_torch()
    if found:
        print(f"cpu_torch: torch {found} and numpy already importable; nothing to install")
        return 0
    code = install(options.requirements, options.cpu_index_url)
    found = importable_torch()
    if code != 0 or not found:
        by_hand = f"-m pip install --index-url {options.cpu_index_url} {' '.join(options.requirements)}"
        print(f"cpu_torch: no PyTorch; the development nodes need it (try {sys.executable} {by_hand})", file=sys.stderr)
        return 1
    print(f"cpu_torch: torch {found} installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

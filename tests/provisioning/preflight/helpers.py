"""Profiles' extension probes for the tests: modules in this folder stand in for compiled extensions."""

from __future__ import annotations

import sys
from typing import Any

# As the node runs it; cwd must be the repository root.
PREFLIGHT = [sys.executable, "-m", "provisioning.preflight"]


def extension(name: str, module: str, op: str, reference: str | None = None) -> dict[str, Any]:
    probe = {"name": name, "module": f"tests.provisioning.preflight.{module}", "op": op}
    if reference is not None:
        probe["reference"] = reference
    return probe


GOOD_EXTENSION = extension("fused-gelu", "good_extension", "mod.fused_gelu(x)", "F.gelu(x, approximate='tanh')")

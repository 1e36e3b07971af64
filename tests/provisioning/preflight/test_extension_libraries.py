"""An extension's compiled kernels are found through module specs, wherever its wheel put them.

flash-attn's kernels are the top-level `flash_attn_2_cuda*.so`, beside the `flash_attn` package, not inside it:
looking only in the package's folder recorded no target at all. `cuobjdump` cannot exist on this machine, so a
fake that lists recorded ELF names stands in for it.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

import pytest

pytestmark = pytest.mark.usefixtures("require_torch")

CUOBJDUMP_LISTING = (
    "ELF file    1: flash_attn_2_cuda.1.sm_90a.cubin\nELF file    2: flash_attn_2_cuda.2.sm_100a.cubin\n"
)


def loaded(name: str, origin: str | None, package_folder: str | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    spec = importlib.machinery.ModuleSpec(name, loader=None, origin=origin, is_package=package_folder is not None)
    if package_folder is not None:
        spec.submodule_search_locations = [package_folder]
    module.__spec__ = spec
    return module


@pytest.fixture
def flash_attn_layout(tmp_path, monkeypatch):
    """flash-attn as its wheel installs it: a pure-Python package and a top-level extension module beside it."""
    site = tmp_path / "site-packages"
    (site / "flash_attn").mkdir(parents=True)
    kernels = site / "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
    kernels.write_bytes(b"\x7fELF")
    package = loaded("flash_attn", str(site / "flash_attn" / "__init__.py"), str(site / "flash_attn"))
    monkeypatch.setitem(sys.modules, "flash_attn", package)
    monkeypatch.setitem(sys.modules, "flash_attn_2_cuda", loaded("flash_attn_2_cuda", str(kernels)))
    return package, kernels


def test_the_kernels_of_flash_attn_are_found_beside_its_package(flash_attn_layout):
    from provisioning.preflight.checks.compiled_extensions import shared_objects

    package, kernels = flash_attn_layout
    assert shared_objects(package) == [kernels]


def test_the_targets_compiled_into_them_are_recorded(flash_attn_layout, tmp_path, monkeypatch):
    from provisioning.preflight.checks.compiled_extensions import elf_targets

    fake_tools = tmp_path / "fake-nvidia-tools"
    fake_tools.mkdir()
    fake = fake_tools / "cuobjdump"
    fake.write_text(
        f"#!/bin/sh\n# A fake of NVIDIA's cuobjdump: prints a recorded listing.\ncat <<'END'\n{CUOBJDUMP_LISTING}END\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_tools}:{sys.exec_prefix}/bin:/usr/bin:/bin")

    assert elf_targets(flash_attn_layout[0]) == ["sm_100a", "sm_90a"]

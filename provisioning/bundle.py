"""What is copied to a node: the preflight and the access tool, as a small gzipped tar of the package.

Both run with the node's Python and PyTorch only: `provisioning/__init__.py` is empty and neither
subpackage imports Django.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SHIPPED = ("__init__.py", "preflight", "node_tools")


@lru_cache(maxsize=1)
def node_bundle() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in SHIPPED:
            path = PACKAGE / name
            for file in sorted([path] if path.is_file() else path.rglob("*.py")):
                info = tar.gettarinfo(str(file), arcname=f"provisioning/{file.relative_to(PACKAGE)}")
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with file.open("rb") as handle:
                    tar.addfile(info, handle)
    return buffer.getvalue()


def node_bundle_sha256() -> str:
    return hashlib.sha256(node_bundle()).hexdigest()

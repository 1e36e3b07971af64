"""Which collectives ran and how many bytes they moved, observed at the dispatcher (not estimated).

A TorchDispatchMode sees every c10d op, the ones FSDP2 and DCP issue included. It is used around eager
work only (one training step, the checkpoint save and load), never around timed or compiled steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

NAMESPACES = {"c10d", "_c10d_functional", "c10d_functional"}


# torch leaves TorchDispatchMode.__init_subclass__ and __init__ unannotated.
class CollectiveLedger(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Counts c10d ops and the size of the largest buffer each one touched (nccl-tests' "size")."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: dict[str, dict[str, int]] = {}

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: Sequence[type],
        args: Sequence[object] = (),
        kwargs: Mapping[str, object] | None = None,
    ) -> object:
        kwargs = kwargs or {}
        if func.namespace in NAMESPACES:
            leaves, _ = tree_flatten((args, kwargs))
            sizes = [leaf.numel() * leaf.element_size() for leaf in leaves if isinstance(leaf, torch.Tensor)]
            entry = self.ops.setdefault(func._schema.name, {"count": 0, "bytes": 0})
            entry["count"] += 1
            entry["bytes"] += max(sizes, default=0)
        return func(*args, **kwargs)

    def as_dict(self) -> dict[str, Any]:
        return {name: dict(entry) for name, entry in sorted(self.ops.items())}

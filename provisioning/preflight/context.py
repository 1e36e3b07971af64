"""What one rank carries from check to check: its card, the settings, the model under test."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from provisioning.preflight.profile import Settings


@dataclass
class RankContext:
    rank: int
    world_size: int
    device: torch.device
    settings: Settings
    run_dir: Path
    expect_arch: str | None = None
    # Test-only faults (--inject): fault name -> the rank that plays it.
    injections: dict[str, int] = field(default_factory=dict)
    exchange_group: Any = None  # the gloo side group the ranks exchange their results on
    collective_timeout_s: float | None = None  # the main group's, for the checks' collectives
    # Filled as the checks run.
    model: Any = None
    optimizer: Any = None
    batch: tuple[torch.Tensor, torch.Tensor] | None = None
    batch_size: int = 0  # per rank: the profile's, or sized from the card's memory (model.sized_batch)
    mesh: Any = None
    loss: torch.Tensor | None = None  # the forward check's loss, for the backward check
    first_step_s: float | None = None  # forward + backward + optimizer step, eager, first time
    collectives: dict[str, Any] = field(default_factory=dict)  # phase -> observed c10d ops
    snapshot: dict[str, torch.Tensor] | None = None  # model and optimizer tensors as saved
    workload_memory: dict[str, Any] | None = None  # the training steps' memory, read before the matmul probe

    @property
    def device_type(self) -> str:
        return self.device.type

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def dtype(self) -> torch.dtype:
        """The fixed compute precision: bf16 on cards that support it, fp32 elsewhere (and on CPU)."""
        if self.is_cuda and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32

    @property
    def precision(self) -> str:
        return "bf16" if self.dtype == torch.bfloat16 else "fp32"

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoint"

    def injected(self, fault: str) -> bool:
        """True on the one rank that plays this test-only fault."""
        return self.injections.get(fault) == self.rank

    def synchronize(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.device)

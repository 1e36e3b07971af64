"""A stand-in for a working compiled extension: a tanh-approximated GELU written out by hand.

The profile compares it with the reference torch op `F.gelu(x, approximate="tanh")`.
"""

from __future__ import annotations

import math

import torch


def fused_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

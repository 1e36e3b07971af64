"""A stand-in for a compiled extension built without kernels for the card (a cu126 flash-attn on a B200).

It imports fine, as such an extension does; its first op raises the error a missing kernel image gives.
The preflight's `extensions` check must fail on it, naming the probe and the rank.
"""

from __future__ import annotations

calls = 0


def fused_gelu(x):
    global calls
    calls += 1
    raise RuntimeError("CUDA error: no kernel image is available for execution on the device")

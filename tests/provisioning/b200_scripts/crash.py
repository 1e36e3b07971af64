"""One optimizer step, then an error on every rank.

The ranks meet at a barrier after their step, so each has stepped before any crashes: torchrun stops the
other ranks as soon as one fails, and a slower rank would otherwise be stopped before its step."""

import os

import torch
import torch.distributed as dist
from torch import nn

world_size = int(os.environ.get("WORLD_SIZE", "1"))
if world_size > 1:
    dist.init_process_group("gloo")
model = nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(2, 4)).sum().backward()
optimizer.step()
if world_size > 1:
    dist.barrier()
raise RuntimeError(f"deliberate crash on rank {os.environ.get('RANK', '0')} after one step")

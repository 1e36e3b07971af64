"""Rank 0 holds a large tensor beside a small model, rank 1 only the model: the pair's memory is unbalanced."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
if world_size > 1:
    dist.init_process_group("gloo")
# 768 MiB of ones (every page written, so resident), against the ~300 MiB a rank with torch loaded holds.
ballast = torch.ones(192 * 2**20) if rank == 0 else None
model = nn.Linear(64, 64)
trained = DistributedDataParallel(model) if world_size > 1 else model
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    loss = trained(torch.randn(8, 64)).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

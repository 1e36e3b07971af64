"""One optimizer step, then an error on every rank."""

import os

import torch
from torch import nn

model = nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(2, 4)).sum().backward()
optimizer.step()
raise RuntimeError(f"deliberate crash on rank {os.environ.get('RANK', '0')} after one step")

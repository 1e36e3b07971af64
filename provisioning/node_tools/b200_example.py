"""A small training script to copy: one process per card, DistributedDataParallel over two, and a checkpoint
saved when the run is asked to stop (SIGTERM: the end of the rental, a move, a maintenance, `b200 trial`'s
timeout).

    torchrun --nproc-per-node 2 b200_example.py --steps 1000
    b200 trial -- b200_example.py
    python b200_example.py --resume          # one process; goes on from checkpoint.pt

It trains a few Linear layers on random data: nccl on cards, gloo on a machine without one. With --steps 0 it
runs until stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
from types import FrameType

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

stop_requested = False


def request_stop(signum: int, frame: FrameType | None) -> None:
    # Only a flag: the loop saves between two steps, never halfway through one.
    global stop_requested
    stop_requested = True


def stop_agreed(device: torch.device) -> bool:
    """Every rank stops at the same step: one rank leaving early would leave the other waiting in a collective."""
    flag = torch.tensor([1.0 if stop_requested else 0.0], device=device)
    if dist.is_initialized():
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def save(path: str, model: nn.Module, optimizer: torch.optim.Optimizer, step: int) -> None:
    # Written aside, then renamed: a SIGKILL during the save leaves the previous checkpoint whole.
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, path + ".partial")
    os.replace(path + ".partial", path)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A tiny model trained on random data, one process per card.")
    parser.add_argument("--steps", type=int, default=0, help="optimizer steps to make (0: until stopped)")
    parser.add_argument("--batch", type=int, default=64, help="examples per step on each card")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--checkpoint", default="checkpoint.pt", help="saved on SIGTERM and at the end")
    parser.add_argument("--resume", action="store_true", help="start from --checkpoint when it exists")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    on_cards = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if on_cards else torch.device("cpu")
    if on_cards:
        torch.cuda.set_device(device)
    if world_size > 1:
        dist.init_process_group("nccl" if on_cards else "gloo")
    signal.signal(signal.SIGTERM, request_stop)

    torch.manual_seed(0)  # the same starting weights on every rank
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    step = 0
    if args.resume and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint, map_location=device)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
    trained = DistributedDataParallel(model) if world_size > 1 else model
    torch.manual_seed(1 + rank)  # each rank its own batches
    if rank == 0:
        print(f"training on {device.type}, {world_size} process(es), from step {step}", flush=True)

    while not args.steps or step < args.steps:
        inputs = torch.randn(args.batch, 256, device=device)
        targets = torch.randint(0, 10, (args.batch,), device=device)
        loss = F.cross_entropy(trained(inputs), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        optimizer.step()
        step += 1
        if rank == 0 and (step == 1 or step % 100 == 0):
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if stop_agreed(device):
            break

    if rank == 0:  # DDP keeps the weights identical on every rank: one copy is enough
        save(args.checkpoint, model, optimizer, step)
        print(f"saved {args.checkpoint} at step {step}", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

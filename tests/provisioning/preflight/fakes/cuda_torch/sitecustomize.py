"""FAKE CUDA build of PyTorch for the preflight tests: this machine's CPU-only torch claims CUDA and cards.

On PYTHONPATH with FAKE_CUDA_CARDS=N, every Python process started so patches torch at startup: CUDA 12.8 (or
FAKE_CUDA_VERSION),
NCCL 2.26.2, cuDNN 9.8.0, a Blackwell arch list and N cards. No kernel can run on these cards: use it only where
the card count or the versions are what a test is about, and where no rank is spawned. With FAKE_CALL_LOG set,
each patched call appends "<pid> torch.<call>" to that file, so a test can see which process asked CUDA.
"""

import os

if "FAKE_CUDA_CARDS" in os.environ:
    import torch
    import torch.cuda.nccl
    import torch.distributed

    CARDS = int(os.environ["FAKE_CUDA_CARDS"])

    def logged(name, value):
        def call(*args, **kwargs):
            if os.environ.get("FAKE_CALL_LOG"):
                with open(os.environ["FAKE_CALL_LOG"], "a") as log:
                    log.write(f"{os.getpid()} torch.{name}\n")
            return value

        return call

    torch.version.cuda = os.environ.get("FAKE_CUDA_VERSION", "12.8")
    torch.cuda.device_count = logged("cuda.device_count", CARDS)
    torch.cuda.get_arch_list = logged("cuda.get_arch_list", ["sm_90", "sm_100", "sm_120", "compute_120"])
    torch.cuda.nccl.version = logged("cuda.nccl.version", (2, 26, 2))
    torch.backends.cudnn.version = logged("backends.cudnn.version", 90800)
    torch.distributed.is_nccl_available = logged("distributed.is_nccl_available", True)

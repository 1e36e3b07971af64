"""The step counter `b200 trial` loads into each rank before the researcher's script, which it never edits.

    torchrun ... b200_steps.py SCRIPT [ARGS...]

It runs SCRIPT as `python SCRIPT ARGS` would (same `sys.argv`, `sys.path[0]` the script's folder, `__name__` is
"__main__"), with a hook on every `torch.optim.Optimizer.step`: each outermost step is timed (on cuda after
`torch.cuda.synchronize()`, so a step's time is its kernels' time, not the time to queue them), and after
B200_TRIAL_STEPS steps the process ends with status 0. After each step it writes its figures to
B200_TRIAL_DIR/rank-<RANK>.json (atomically, so a run stopped at its timeout still shows how far it got):

    {"rank", "steps", "times": [seconds since the script started, at the end of each step],
     "peak_memory_bytes", "card_memory_used_bytes", "memory_kind": "cuda_allocator" | "rss"}

and the rank's stdout and stderr go to B200_TRIAL_DIR/output.log.

On cuda the peak is the allocator's (`torch.cuda.max_memory_allocated`, over the cards the rank used) and the
card's used memory is read from `torch.cuda.mem_get_info` (every process on the card, the CUDA context, NCCL's
buffers); elsewhere the peak is the process's resident memory (getrusage), and the card's is null.

Standard library, and torch when the interpreter has it: without torch the script runs and no step is
counted. Python 3.8+: the validated environment is the researcher's, whatever its version.
"""

from __future__ import annotations

import json
import os
import resource
import runpy
import sys
import time
from typing import Any

FOLDER_VARIABLE = "B200_TRIAL_DIR"
STEPS_VARIABLE = "B200_TRIAL_STEPS"
DEVICE_VARIABLE = "B200_TRIAL_DEVICE"
OUTPUT_FILE = "output.log"


class StepCounter:
    """Counts the outermost optimizer steps: an optimizer that steps an inner one (ZeroRedundancyOptimizer, a
    wrapper calling super().step()) counts once, and its step has finished, collectives included, when counted."""

    def __init__(self, folder: str, limit: int, device: str, rank: int) -> None:
        self.folder, self.limit, self.device, self.rank = folder, limit, device, rank
        self.times: list[float] = []
        self.depth = 0
        self.started = time.perf_counter()
        self.torch: Any = None

    def before(self, *_: object) -> None:
        self.depth += 1

    def after(self, *_: object) -> None:
        self.depth = max(0, self.depth - 1)
        if self.depth:
            return
        if self.on_cuda():
            for card in self.cards_used():
                self.torch.cuda.synchronize(card)
        self.times.append(round(time.perf_counter() - self.started, 6))
        self.write()
        if len(self.times) >= self.limit:
            self.finish()

    def on_cuda(self) -> bool:
        return self.device == "cuda" and self.torch is not None and self.torch.cuda.is_initialized()

    def memory(self) -> dict[str, Any]:
        if self.on_cuda():
            return self.cuda_memory()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Linux counts ru_maxrss in KiB, macOS in bytes.
        peak_bytes = peak if sys.platform == "darwin" else peak * 1024
        return {"peak_memory_bytes": int(peak_bytes), "card_memory_used_bytes": None, "memory_kind": "rss"}

    def cards_used(self) -> list[int]:
        cuda = self.torch.cuda
        return [card for card in range(cuda.device_count()) if cuda.max_memory_allocated(card)]

    def cuda_memory(self) -> dict[str, Any]:
        """The allocator's peak over every card the rank used (a script may place its model with .to("cuda:1")
        and never call set_device), and the used memory of the card it used most: asking a card it never touched
        would open a CUDA context there."""
        cuda = self.torch.cuda
        peaks: list[int] = [int(cuda.max_memory_allocated(card)) for card in range(cuda.device_count())]
        busiest = sorted(range(len(peaks)), key=lambda card: -peaks[card])[:1]
        used = None
        if busiest and peaks[busiest[0]]:
            free, total = cuda.mem_get_info(busiest[0])
            used = int(total - free)
        return {"peak_memory_bytes": sum(peaks), "card_memory_used_bytes": used, "memory_kind": "cuda_allocator"}

    def write(self) -> None:
        figures = {"rank": self.rank, "steps": len(self.times), "times": self.times, **self.memory()}
        path = os.path.join(self.folder, f"rank-{self.rank}.json")
        with open(path + ".partial", "w") as handle:
            json.dump(figures, handle)
        os.replace(path + ".partial", path)

    def finish(self) -> None:
        """Ends the rank where it stands: os._exit, because SystemExit raised inside the script's loop could be
        caught there, or run its `finally` (a checkpoint, a collective the other rank never joins)."""
        sys.stderr.write(f"b200 trial: rank {self.rank} made {len(self.times)} optimizer steps, its run ends here\n")
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(0)


def install(counter: StepCounter) -> None:
    """Hooks every optimizer's step: torch's global step hooks where it has them (PyTorch >= 2.0, which wraps
    each subclass's step), else each optimizer class's own step, wrapped when its first instance is made."""
    try:
        import torch  # the script's interpreter may have no torch: then nothing is counted
        import torch.optim.optimizer as optimizer_module
    except ImportError:
        return
    counter.torch = torch
    if hasattr(optimizer_module, "register_optimizer_step_post_hook"):
        optimizer_module.register_optimizer_step_pre_hook(counter.before)
        optimizer_module.register_optimizer_step_post_hook(counter.after)
        return
    patch_optimizer_classes(torch.optim.Optimizer, counter)


def patch_optimizer_classes(base: Any, counter: StepCounter) -> None:
    original_init = base.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        classes: list[Any] = list(type(self).__mro__)
        for klass in classes:
            if "step" in vars(klass) and not getattr(klass.step, "_b200_counted", False):
                klass.step = counted(klass.step, counter)
        original_init(self, *args, **kwargs)

    base.__init__ = init


def counted(step: Any, counter: StepCounter) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        counter.before()
        result = step(*args, **kwargs)
        counter.after()
        return result

    wrapper._b200_counted = True  # type: ignore[attr-defined]
    return wrapper


def capture_output(folder: str) -> None:
    """The ranks' stdout and stderr into one file of the run's folder, apart from torchrun's own (its tracebacks
    and reports would bury the script's last lines); O_APPEND keeps lines whole, as a terminal shows them."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    log = os.open(os.path.join(folder, OUTPUT_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("usage: b200_steps.py SCRIPT [ARGS...] (run by `b200 trial`)")
    script = os.path.abspath(argv[0])
    counter = StepCounter(
        folder=os.environ.get(FOLDER_VARIABLE) or os.getcwd(),
        limit=int(os.environ.get(STEPS_VARIABLE) or "30"),
        device=os.environ.get(DEVICE_VARIABLE) or "cpu",
        rank=int(os.environ.get("RANK") or "0"),
    )
    if os.environ.get(FOLDER_VARIABLE):
        capture_output(counter.folder)
    install(counter)
    counter.write()  # the hook loaded: a run with no file here never reached its script
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` would, never this tool's folder
    counter.started = time.perf_counter()
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])

"""The preflight profile: which checks run, what they probe, the thresholds. Defaults are built in.

A profile is a JSON object that operators keep with a preparation; every key is optional:

    {
      "name": "pytorch-blackwell-2gpu",
      "checks": ["stack", "arch", ...],          # the checks that run; the others report `skip`
      "shard": true,                             # FSDP2 over the cards; default: true when world size >= 2
      "compile": "auto",                         # torch.compile in step_time: true, false, "auto" (cuda only)
      "model": {"vocab": 512, "dim": 256, "layers": 4, "hidden": 1024, "batch": 8, "seq": 64},
      "memory_target": 0.48,                     # cuda: batch sized to this share of a card's memory
      "steps": {"warmup": 1, "measure": 3},
      "allreduce": {"bytes": 16777216, "warmup": 1, "iters": 5},
      "matmul": {"size": 16384, "warmup": 5, "iters": 20},
      "extensions": [{"name": "flash-attn", "module": "flash_attn",
                      "op": "mod.flash_attn_func(q, k, v)",
                      "reference": "F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),"
                                   " v.transpose(1, 2)).transpose(1, 2)",
                      "atol": 0.02, "rtol": 0.02}],
      "thresholds": {"busbw_floor_gbps": 603.0, ...},
      "timeout_s": 900,
      "dcgm": {"level": 2, "timeout_s": 600}
    }

An extension's `op` and `reference` are either a dotted callable (called with `x`) or a Python expression
evaluated with: `torch`, `F` (torch.nn.functional), `mod` (the imported module), `device`, `dtype`, and
seeded inputs on the card in the run's precision: `x`, `y` (64 x 64) and `q`, `k`, `v` (2, 128, 4, 64:
batch, sequence, heads, head size, the layout flash-attn takes). The profile is operator data kept with
the preparation, trusted like the setup step that installs the stack.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioning.preflight import cards
from provisioning.preflight.report import ALL_CHECKS

# Until the node's cards are known (cards.for_node, on cuda), the card-specific figures are the B200's, the
# cards this shop sells: min_cuda, min_driver, nvlink_min_active_links, busbw_floor_gbps, matmul_tflops_floor.
DEFAULT_THRESHOLDS: dict[str, Any] = {
    "min_torch": "2.7",  # first PyTorch with Blackwell (sm_100) support
    **cards.figures(cards.CARDS[0]),
    "balance_low_fraction": 0.05,  # fail when one card peaks under this fraction of its capacity ...
    "balance_high_fraction": 0.90,  # ... while another peaks over this one
    "balance_min_ratio": 0.5,  # warn when the smallest peak is under this fraction of the largest
    "idle_max_mib": 15,  # an idle card uses at most this much memory and runs no process
    "ecc_uncorrected_volatile_max": 0,  # uncorrected ECC errors since the last reset: fail above
    "ecc_uncorrected_aggregate_max": 0,  # over the card's life: warn above
    "remapped_rows_uncorrectable_max": 0,  # rows remapped for uncorrectable errors: warn above
}

DEVICE_DEFAULTS: dict[str, dict[str, Any]] = {
    # Small enough for two gloo processes on two cores: the whole rehearsal takes seconds.
    "cpu": {
        "model": {"vocab": 512, "dim": 256, "layers": 4, "hidden": 1024, "batch": 8, "seq": 64},
        "steps": {"warmup": 1, "measure": 3},
        "allreduce": {"bytes": 16 * 2**20, "warmup": 1, "iters": 5},
        "matmul": {"size": 512, "warmup": 1, "iters": 5},
        "timeout_s": 300,
        "memory_target": None,  # the batch above, as given: the rehearsal measures logic, not the host's memory
    },
    # About 400 M parameters: a real load on a B200 pair, a few seconds per step.
    "cuda": {
        "model": {"vocab": 32768, "dim": 2048, "layers": 8, "hidden": 8192, "batch": 8, "seq": 1024},
        "steps": {"warmup": 3, "measure": 10},
        "allreduce": {"bytes": 8 * 2**30, "warmup": 5, "iters": 20},  # nccl-tests' 8 GiB point
        "matmul": {"size": 16384, "warmup": 5, "iters": 20},
        "timeout_s": 900,  # with dcgm (<= 600 s) the whole run stays under 25 minutes
        # The batch per card is sized so the training step peaks near this share of the card's memory
        # (model.sized_batch): with the split broken, one card would carry about twice that, over the 90 %
        # line of memory_balance (or out of memory), so the balance rule can fail when it should.
        "memory_target": 0.48,
    },
}

KEYS = {"name", "checks", "shard", "compile", "model", "steps", "allreduce", "matmul", "extensions"}
KEYS |= {"thresholds", "timeout_s", "dcgm", "memory_target"}
SECTION_KEYS = {
    "model": {"vocab", "dim", "layers", "hidden", "batch", "seq"},
    "steps": {"warmup", "measure"},
    "allreduce": {"bytes", "warmup", "iters"},
    "matmul": {"size", "warmup", "iters"},
    "dcgm": {"level", "timeout_s"},
}
EXTENSION_KEYS = {"name", "module", "op", "reference", "atol", "rtol"}
MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class ProfileError(ValueError):
    """The profile cannot be read or is not valid: a usage error (exit 2)."""


@dataclass(frozen=True)
class Extension:
    name: str
    module: str
    op: str
    reference: str | None = None
    atol: float | None = None
    rtol: float | None = None


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, resolved for one device and world size; picklable for the rank processes."""

    name: str
    source: str
    sha256: str | None
    checks: tuple[str, ...]
    shard: bool
    compile: bool
    model: dict[str, int]
    steps: dict[str, int]
    allreduce: dict[str, int]
    matmul: dict[str, int]
    extensions: tuple[Extension, ...]
    thresholds: dict[str, Any]
    timeout_s: float
    dcgm: dict[str, int] = field(default_factory=lambda: {"level": 2, "timeout_s": 600})
    memory_target: float | None = None
    thresholds_given: frozenset[str] = frozenset()  # the keys the profile set: card figures never replace them
    threshold_sources: dict[str, str] = field(default_factory=dict)  # card key -> where its value came from

    def missing_figure(self, key: str) -> str | None:
        """Why a card floor is None because the card has no figure (warn), not because it was disabled."""
        return cards.unknown_figure(self.threshold_sources, key)

    def runs(self, check: str) -> bool:
        return check in self.checks

    def describe(self) -> dict[str, Any]:
        """What the report keeps about the profile, so the verified run can be reproduced."""
        return {
            "name": self.name,
            "source": self.source,
            "sha256": self.sha256,
            "checks": list(self.checks),
            "shard": self.shard,
            "compile": self.compile,
            "model": self.model,
            "steps": self.steps,
            "allreduce": self.allreduce,
            "matmul": self.matmul,
            "extensions": [extension.__dict__ for extension in self.extensions],
            "timeout_s": self.timeout_s,
            "dcgm": self.dcgm,
            "memory_target": self.memory_target,
        }


def read_profile(path: Path | None) -> tuple[dict[str, Any], str, str | None]:
    """The raw profile, where it came from and its sha256; `{}` for the built-in defaults."""
    if path is None:
        return {}, "built-in", None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProfileError(f"cannot read the profile {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProfileError(f"the profile {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ProfileError(f"the profile {path} must be a JSON object")
    return data, str(path), hashlib.sha256(raw).hexdigest()


def resolve(data: dict[str, Any], *, source: str, sha256: str | None, device: str, world_size: int) -> Settings:
    unknown = set(data) - KEYS
    if unknown:
        raise ProfileError(f"unknown profile keys: {', '.join(sorted(unknown))} (known: {', '.join(sorted(KEYS))})")
    defaults = DEVICE_DEFAULTS[device]
    checks = data.get("checks", list(ALL_CHECKS))
    if not isinstance(checks, list) or not all(isinstance(check, str) for check in checks):
        raise ProfileError("profile `checks` must be a list of check names")
    unknown_checks = set(checks) - set(ALL_CHECKS)
    if unknown_checks:
        raise ProfileError(f"unknown checks in the profile: {', '.join(sorted(unknown_checks))}")
    shard = data.get("shard")
    if shard is not None and not isinstance(shard, bool):
        raise ProfileError("profile `shard` must be true or false")
    compile_ = data.get("compile", "auto")
    if compile_ not in (True, False, "auto"):
        raise ProfileError('profile `compile` must be true, false or "auto"')
    thresholds = dict(DEFAULT_THRESHOLDS)
    given = data.get("thresholds", {})
    if not isinstance(given, dict):
        raise ProfileError("profile `thresholds` must be an object")
    unknown_thresholds = set(given) - set(DEFAULT_THRESHOLDS)
    if unknown_thresholds:
        raise ProfileError(f"unknown thresholds: {', '.join(sorted(unknown_thresholds))}")
    for key, value in given.items():
        wants_text = isinstance(DEFAULT_THRESHOLDS[key], str)
        if value is not None and (isinstance(value, str) if wants_text else _is_number(value)) is False:
            raise ProfileError(f"threshold `{key}` must be like {DEFAULT_THRESHOLDS[key]!r}, or null to disable it")
    thresholds.update(given)
    memory_target = data.get("memory_target", defaults["memory_target"])
    if memory_target is not None and not (_is_number(memory_target) and 0 < memory_target < 0.9):
        raise ProfileError("profile `memory_target` must be a share of a card's memory above 0 and below 0.9, or null")
    timeout_s = data.get("timeout_s", defaults["timeout_s"])
    if not _is_number(timeout_s) or timeout_s <= 0:
        raise ProfileError("profile `timeout_s` must be a positive number of seconds")
    return Settings(
        name=str(data.get("name", "built-in")),
        source=source,
        sha256=sha256,
        checks=tuple(check for check in ALL_CHECKS if check in checks),
        shard=world_size >= 2 if shard is None else shard,
        compile=device == "cuda" if compile_ == "auto" else compile_,
        model=_section(data, "model", defaults["model"]),
        steps=_section(data, "steps", defaults["steps"]),
        allreduce=_section(data, "allreduce", defaults["allreduce"]),
        matmul=_section(data, "matmul", defaults["matmul"]),
        extensions=_extensions(data.get("extensions", [])),
        thresholds=thresholds,
        timeout_s=float(timeout_s),
        dcgm=_section(data, "dcgm", {"level": 2, "timeout_s": 600}),
        memory_target=memory_target,
        thresholds_given=frozenset(given),
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _section(data: dict[str, Any], key: str, defaults: dict[str, int]) -> dict[str, int]:
    given = data.get(key, {})
    if not isinstance(given, dict):
        raise ProfileError(f"profile `{key}` must be an object")
    unknown = set(given) - SECTION_KEYS[key]
    if unknown:
        raise ProfileError(f"unknown keys in profile `{key}`: {', '.join(sorted(unknown))}")
    merged = {**defaults, **given}
    for name, value in merged.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ProfileError(f"profile `{key}.{name}` must be a non-negative integer")
    return merged


def _extensions(items: Any) -> tuple[Extension, ...]:
    if not isinstance(items, list):
        raise ProfileError("profile `extensions` must be a list")
    extensions = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not {"name", "module", "op"} <= set(item) or set(item) - EXTENSION_KEYS:
            raise ProfileError(
                f"profile `extensions[{index}]` must be an object with name, module, op"
                f" (and optionally reference, atol, rtol)"
            )
        if not MODULE_NAME.match(str(item["module"])):
            raise ProfileError(f"profile `extensions[{index}].module` is not a module name: {item['module']!r}")
        for key in ("atol", "rtol"):
            if item.get(key) is not None and not _is_number(item[key]):
                raise ProfileError(f"profile `extensions[{index}].{key}` must be a number")
        extensions.append(
            Extension(
                name=str(item["name"]),
                module=str(item["module"]),
                op=str(item["op"]),
                reference=None if item.get("reference") is None else str(item["reference"]),
                atol=item.get("atol"),
                rtol=item.get("rtol"),
            )
        )
    return tuple(extensions)

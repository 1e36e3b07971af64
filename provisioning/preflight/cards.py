"""The figures a node's cards must reach, keyed by compute capability and card name, with their sources.

A floor that is a B200 figure fails every other card (a single H200 reaches about half of the B200's bf16
matmul, two H100 about 55 % of its all-reduce, an A100 has 12 NVLink links, not 18), so the card-specific
thresholds are looked up here from what `nvidia-smi` says the node holds, before any gate runs. Where this
table has no figure for a card, the threshold is `None` and the check records the measurement with a
warning, never a failure. A threshold the profile (or the node's own thresholds) sets explicitly wins.

Sources: the B200 and H100/H200 figures are those of docs/PREFLIGHT.md ("Facts to build on"): measured
dense bf16 matmul peaks (1,745 and 790 TFLOP/s) and measured nccl-tests ring all-reduce bus bandwidth at
8 GiB (670 and 365 GB/s). Floors follow DCGM's convention for compute (0.75 x measured) and nccl-tests'
NCCL_TESTS_MIN_BW convention for bandwidth (0.9 x measured). CUDA minimums are the first CUDA release with
native code for the architecture (sm_80: 11.0, sm_90: 11.8, sm_100: 12.8); NVLink link counts are the
SXM parts' (NVLink 3: 12, NVLink 4 and 5: 18).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

COMPUTE_FLOOR = 0.75  # DCGM: floors are 0.75 x a measured value
BANDWIDTH_FLOOR = 0.9  # nccl-tests: NCCL_TESTS_MIN_BW fails below 0.9 x the given value

# The card-specific keys of the thresholds; the others (ECC, idle memory, balance) hold for every card.
CARD_KEYS = ("min_cuda", "min_driver", "nvlink_min_active_links", "busbw_floor_gbps", "matmul_tflops_floor")


@dataclass(frozen=True)
class Card:
    family: str
    sm: str
    names: tuple[str, ...]  # substrings of nvidia-smi's name, e.g. "B200" in "NVIDIA B200"
    excludes: tuple[str, ...] = ()  # PCIe and NVL variants differ in links, power and clocks
    min_cuda: str | None = None
    min_driver: str | None = None
    nvlink_links: int | None = None
    busbw_gbps: float | None = None  # measured nccl-tests ring busbw, 8 GiB, between two of these cards
    bf16_tflops: float | None = None  # measured dense bf16 matmul peak on one card
    source: str = ""


class HopperSxm(TypedDict):
    sm: str
    excludes: tuple[str, ...]
    min_cuda: str
    nvlink_links: int


class HopperFigures(TypedDict):
    busbw_gbps: float
    bf16_tflops: float
    source: str


HOPPER_SXM: HopperSxm = {"sm": "sm_90", "excludes": ("PCIE", "NVL"), "min_cuda": "11.8", "nvlink_links": 18}
HOPPER_FIGURES: HopperFigures = {
    "busbw_gbps": 365.0,
    "bf16_tflops": 790.0,
    "source": "docs/PREFLIGHT.md: bf16 matmul about 790 TFLOP/s, ring busbw about 365-370 GB/s (H100/H200)",
}

CARDS = (
    Card(
        "B200",
        sm="sm_100",
        names=("B200",),
        min_cuda="12.8",
        min_driver="570",
        nvlink_links=18,
        busbw_gbps=670.0,
        bf16_tflops=1745.0,
        source="docs/PREFLIGHT.md: bf16 matmul about 1,745 TFLOP/s, ring busbw 670-680 GB/s at 8 GiB (NVLink 5)",
    ),
    Card("H200", names=("H200",), **HOPPER_SXM, **HOPPER_FIGURES),
    Card("H100", names=("H100",), **HOPPER_SXM, **HOPPER_FIGURES),
    Card("H100/H200 PCIe or NVL", sm="sm_90", names=("H100", "H200"), min_cuda="11.8", source="no measured figure"),
    Card(
        "A100",
        sm="sm_80",
        names=("A100",),
        excludes=("PCIE",),
        min_cuda="11.0",
        nvlink_links=12,
        source="no measured compute or bandwidth figure; 12 NVLink 3 links on the SXM part",
    ),
    Card("A100 PCIe", sm="sm_80", names=("A100",), min_cuda="11.0", source="no measured figure"),
)


def sm_of(compute_capability: str | None) -> str | None:
    """nvidia-smi's "10.0" -> "sm_100"; None when unreadable."""
    try:
        major, minor = str(compute_capability).strip().split(".")
        return f"sm_{int(major)}{int(minor)}"
    except ValueError:
        return None


def identify(name: str, compute_capability: str | None) -> Card | None:
    """The table's entry for one card: its name and its capability must both match."""
    upper, sm = name.upper(), sm_of(compute_capability)
    for card in CARDS:
        if card.sm != sm or not any(part in upper for part in card.names):
            continue
        if any(part in upper for part in card.excludes):
            continue
        return card
    return None


def figures(card: Card) -> dict[str, Any]:
    return {
        "min_cuda": card.min_cuda,
        "min_driver": card.min_driver,
        "nvlink_min_active_links": card.nvlink_links,
        "busbw_floor_gbps": None if card.busbw_gbps is None else round(BANDWIDTH_FLOOR * card.busbw_gbps, 1),
        "matmul_tflops_floor": None if card.bf16_tflops is None else round(COMPUTE_FLOOR * card.bf16_tflops, 1),
    }


def for_node(
    thresholds: dict[str, Any], given: frozenset[str], node_gpus: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The thresholds for the cards nvidia-smi listed, and where each card-specific one came from.

    `given` are the keys the profile set: they are kept as they are. A node whose cards are not all of one
    known kind gets no card figure at all (every card floor `None`: measured and warned, never failed).
    """
    kinds = {identify(str(gpu.get("name", "")), gpu.get("compute_capability")) for gpu in node_gpus}
    names = sorted({str(gpu.get("name", "?")) for gpu in node_gpus})
    card = next(iter(kinds)) if len(kinds) == 1 else None
    resolved = dict(thresholds)
    sources = {"card": f"{card.family} ({card.sm})" if card else f"unknown ({', '.join(names) or 'no card listed'})"}
    for key in CARD_KEYS:
        if key in given:
            sources[key] = "the profile"
            continue
        if card is None:
            resolved[key] = None
            what = "no card listed" if not node_gpus else f"no figure for {', '.join(names)}"
            sources[key] = f"{what}: measured and recorded, not enforced"
            continue
        resolved[key] = figures(card)[key]
        if resolved[key] is None:
            sources[key] = f"no figure for {card.family}: measured and recorded, not enforced"
        else:
            sources[key] = f"{card.family} ({card.sm}): {card.source}"
    return resolved, sources


def unknown_figure(sources: dict[str, str], key: str) -> str | None:
    """Why a card floor is missing (the card has no figure), or None when it is set or disabled on purpose."""
    source = sources.get(key, "")
    return source if source.startswith("no ") else None

"""Fakes of NVIDIA's node tools for the preflight tests: nvidia-smi and dcgmi cannot run on this machine (no GPU).

`install(folder, nvidia_smi=..., dcgmi=...)` writes one shell script per tool into `folder` (put it first on PATH).
A fake prints the canned output of the first pattern found in its arguments and exits with the recorded status;
a call no pattern matches exits 99 saying so. With FAKE_CALL_LOG set, each call appends "<parent pid> <tool>
<arguments>" to that file, so a test can see who called what, in which order.

The canned outputs are shaped like the real tools' (two B200 cards on an HGX board), one dict per tool:
{pattern: (stdout, stderr, exit status)}.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

Canned = tuple[str, str, int]

FAKES = Path(__file__).resolve().parent / "fakes"
ANY = ""  # a pattern every call matches: put it last
UUIDS = ("GPU-4d2a1f70-0c4e-6b3f-a1d2-7c9e0b5f3a11", "GPU-9b8c7d6e-5f4a-3b2c-1d0e-f9e8d7c6b5a4")


def ok(stdout: str) -> Canned:
    return stdout, "", 0


def nvlink_status(speeds: list[list[str]], name: str = "NVIDIA B200") -> str:
    """`nvidia-smi nvlink --status`: one block per card, one line per link."""
    text = ""
    for index, links in enumerate(speeds):
        text += f"GPU {index}: {name} (UUID: {UUIDS[index]})\n"
        text += "".join(f"\t Link {link}: {speed}\n" for link, speed in enumerate(links))
    return text


DCGM_PASS = {
    "DCGM Diagnostic": {
        "tests": [
            {"name": "memory", "results": [{"entity_id": 0, "status": "Pass"}, {"entity_id": 1, "status": "Pass"}]},
            {"name": "pcie", "results": [{"entity_id": 0, "status": "Pass"}, {"entity_id": 1, "status": "Pass"}]},
        ]
    }
}


def board(cards: int, name: str = "NVIDIA B200", capability: str = "10.0", links: int = 18) -> dict[str, Canned]:
    """A healthy HGX board (B200 unless told) as nvidia-smi answers the preflight, with `cards` cards listed."""

    def rows(template: str) -> Canned:
        return ok("".join(template.format(i=i, uuid=UUIDS[i]) + "\n" for i in range(cards)))

    return {
        "--query-gpu=index,name,uuid,compute_cap": rows(f"{{i}}, {name}, {{uuid}}, {capability}"),
        "--query-gpu=driver_version": rows("570.124.06"),
        "--query-gpu=index,uuid,memory.used": rows("{i}, {uuid}, 0"),
        "--query-compute-apps=": ok(""),
        "--query-gpu=index,uuid,ecc.mode.current": rows("{i}, {uuid}, Enabled, 0, 0"),
        "--query-remapped-rows=": rows("{uuid}, 0, 0, No, No"),
        "--query-gpu=index,fabric.state,fabric.status": rows("{i}, Completed, Success"),
        "nvlink --status": ok(nvlink_status([["53.125 GB/s"] * links] * cards, name)),
    }


TWO_B200 = board(2)
ONE_OF_TWO_B200 = board(1)  # card 1 gone: unseated, or fallen off the bus
DCGMI_PASS: dict[str, Canned] = {"diag": ok(json.dumps(DCGM_PASS))}


def script(tool: str, folder: Path, canned: dict[str, Canned]) -> str:
    lines = [
        "#!/bin/sh",
        f"# FAKE {tool}, written by tests/provisioning/preflight/fake_tools.py: "
        "the real tool cannot run on this machine (no GPU).",
        f'[ -n "$FAKE_CALL_LOG" ] && echo "$PPID {tool} $*" >> "$FAKE_CALL_LOG"',
        'case "$*" in',
    ]
    for number, (pattern, (stdout, stderr, status)) in enumerate(canned.items()):
        out, err = folder / f"{tool}.{number}.out", folder / f"{tool}.{number}.err"
        out.write_text(stdout)
        err.write_text(stderr)
        answer = f"cat {shlex.quote(str(out))}; cat {shlex.quote(str(err))} >&2; exit {status}"
        lines.append(f"  *{shlex.quote(pattern)}*) {answer} ;;")
    lines += [f'  *) echo "fake {tool}: no canned output for: $*" >&2; exit 99 ;;', "esac", ""]
    return "\n".join(lines)


def install(
    folder: Path,
    *,
    nvidia_smi: dict[str, Canned],
    dcgmi: dict[str, Canned] | None = None,
    all_reduce_perf: dict[str, Canned] | None = None,
) -> Path:
    """Write the fakes into `folder` and return it; dcgmi and nccl-tests are left out (not on PATH) when None."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool, canned in (("nvidia-smi", nvidia_smi), ("dcgmi", dcgmi), ("all_reduce_perf", all_reduce_perf)):
        if canned is None:
            continue
        path = folder / tool
        path.write_text(script(tool, folder, canned))
        path.chmod(0o755)
    return folder


def environment(
    tools: Path, *, cuda_cards: int | None = None, call_log: Path | None = None, cuda: str = "12.8"
) -> dict[str, str]:
    """The preflight's environment: the fakes first on PATH and, with cuda_cards, the fake CUDA build of torch."""
    env = {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    if cuda_cards is not None:
        env["PYTHONPATH"] = str(FAKES / "cuda_torch")
        env["FAKE_CUDA_CARDS"] = str(cuda_cards)
        env["FAKE_CUDA_VERSION"] = cuda
    if call_log is not None:
        env["FAKE_CALL_LOG"] = str(call_log)
    return env

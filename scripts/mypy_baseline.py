"""mypy over the project, held to a baseline that only shrinks (`make lint`, `make test`).

mypy runs with the project's configuration ([tool.mypy] in pyproject.toml; its cache in .mypy_cache). Its errors
are counted by file and error code and compared with mypy-baseline.json ({file: {code: count}}):

- a count above the baseline's, or a file or code the baseline does not have, fails (exit 1) and shows the
  errors of each such file and code;
- fewer errors than the baseline allows pass (exit 0) and are listed: `--update` writes the smaller counts;
- `--update` rewrites the baseline from this run, and refuses to (exit 1) when any count grew, unless
  `--allow-growth` is given too (for a new stub release or mypy version, say, that finds more).

An error is counted under its file and code, not its line: code moving around a file keeps its errors' entries.

    python scripts/mypy_baseline.py                    # check
    python scripts/mypy_baseline.py --update           # lock in what shrank
    python scripts/mypy_baseline.py --update --allow-growth
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "mypy-baseline.json"
NO_CODE = "(no code)"  # an error mypy gives no code (a syntax error, say)

# `path:line: error: message  [code]` (columns after the line with show_column_numbers or show_error_end).
ERROR_LINE = re.compile(
    r"^(?P<file>[^:\n]+?):(?P<line>\d+)(?::\d+)*: error: (?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)

Counts = dict[str, dict[str, int]]


@dataclass(frozen=True)
class MypyError:
    file: str
    line: int
    code: str
    message: str


@dataclass(frozen=True)
class Change:
    file: str
    code: str
    allowed: int  # the baseline's count (0: not in the baseline)
    found: int

    def describe(self) -> str:
        if self.allowed == 0:
            return f"{self.file} [{self.code}]: {self.found} new (not in the baseline)"
        return f"{self.file} [{self.code}]: {self.found}, the baseline allows {self.allowed}"


@dataclass
class Comparison:
    grown: list[Change] = field(default_factory=list)
    shrunk: list[Change] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.grown


def parse(output: str) -> list[MypyError]:
    """mypy's error lines (notes and the summary are left out), paths as POSIX paths."""
    errors = []
    for line in output.splitlines():
        match = ERROR_LINE.match(line.rstrip())
        if match:
            errors.append(
                MypyError(
                    file=match["file"].replace("\\", "/").removeprefix("./"),
                    line=int(match["line"]),
                    code=match["code"] or NO_CODE,
                    message=match["message"],
                )
            )
    return errors


def count(errors: Iterable[MypyError]) -> Counts:
    counts: Counts = {}
    for error in errors:
        by_code = counts.setdefault(error.file, {})
        by_code[error.code] = by_code.get(error.code, 0) + 1
    return normalised(counts)


def normalised(counts: Mapping[str, Mapping[str, int]]) -> Counts:
    """Sorted by file and code, without zero counts or files left with none: the baseline file's form."""
    out: Counts = {}
    for file in sorted(counts):
        by_code = {code: n for code, n in sorted(counts[file].items()) if n > 0}
        if by_code:
            out[file] = by_code
    return out


def compare(found: Mapping[str, Mapping[str, int]], baseline: Mapping[str, Mapping[str, int]]) -> Comparison:
    """What grew past the baseline (a new file or code included) and what shrank below it (to zero included)."""
    comparison = Comparison()
    for file in sorted(set(found) | set(baseline)):
        now, allowed = found.get(file, {}), baseline.get(file, {})
        for code in sorted(set(now) | set(allowed)):
            change = Change(file=file, code=code, allowed=allowed.get(code, 0), found=now.get(code, 0))
            if change.found > change.allowed:
                comparison.grown.append(change)
            elif change.found < change.allowed:
                comparison.shrunk.append(change)
    return comparison


def load_baseline(path: Path) -> Counts:
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(
        isinstance(by_code, dict) and all(isinstance(n, int) for n in by_code.values()) for by_code in data.values()
    ):
        raise ValueError(f"{path.name}: expected {{file: {{error code: count}}}}")
    return normalised(data)


def dump_baseline(counts: Mapping[str, Mapping[str, int]]) -> str:
    return json.dumps(normalised(counts), indent=2, sort_keys=True) + "\n"


def run_mypy(extra_args: list[str]) -> tuple[int, str]:
    """mypy's exit status and its output, run as `python -m mypy` from the repository root."""
    command = [sys.executable, "-m", "mypy", "--no-pretty", "--no-error-summary", "--show-error-codes", *extra_args]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


def report(comparison: Comparison, errors: list[MypyError], *, baseline_name: str) -> list[str]:
    """The lines to print: each growth with its errors, then what shrank."""
    lines = []
    if comparison.grown:
        lines.append(f"mypy: more errors than {baseline_name} allows (fix them; the baseline only shrinks):")
        for change in comparison.grown:
            lines.append(f"  {change.describe()}")
            for error in errors:
                if error.file == change.file and error.code == change.code:
                    lines.append(f"    {error.file}:{error.line}: {error.message}  [{error.code}]")
    if comparison.shrunk:
        lines.append(f"mypy: fewer errors than {baseline_name} allows (run with --update to lock that in):")
        lines.extend(f"  {change.describe()}" for change in comparison.shrunk)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, default=BASELINE, help="the baseline file (mypy-baseline.json)")
    parser.add_argument("--update", action="store_true", help="rewrite the baseline from this run")
    parser.add_argument("--allow-growth", action="store_true", help="with --update: let counts grow too")
    parser.add_argument("mypy_args", nargs="*", help="passed on to mypy (after --)")
    args = parser.parse_args(argv)

    started = time.monotonic()
    status, output = run_mypy(args.mypy_args)
    errors = parse(output)
    if status not in (0, 1) or (status == 1 and not errors):  # mypy crashed, or its configuration is wrong
        print(output, end="", file=sys.stderr)
        print(f"mypy failed (exit status {status}) without a list of errors", file=sys.stderr)
        return 2
    found = count(errors)
    if not args.baseline.exists():
        print(f"mypy: no {args.baseline.name} yet: every error counts as new (--update --allow-growth writes it)")
    baseline = load_baseline(args.baseline)
    comparison = compare(found, baseline)
    for line in report(comparison, errors, baseline_name=args.baseline.name):
        print(line)

    total = sum(n for by_code in found.values() for n in by_code.values())
    summary = f"mypy: {total} errors in {len(found)} files ({time.monotonic() - started:.1f} s)"
    if args.update:
        if comparison.grown and not args.allow_growth:
            print(f"{summary}; {args.baseline.name} not rewritten: it only shrinks (--allow-growth to let it grow)")
            return 1
        args.baseline.write_text(dump_baseline(found), encoding="utf-8")
        print(f"{summary}; {args.baseline.name} rewritten")
        return 0
    print(f"{summary}; {'within' if comparison.ok else 'beyond'} {args.baseline.name}")
    return 0 if comparison.ok else 1


if __name__ == "__main__":
    sys.exit(main())

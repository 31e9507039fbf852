"""Instruction counts of `ckptlog fold`: `python -m bench.instructions [--small N] [--large M]`.

This host's speed drifts by up to 2x within the hour, so seconds cannot resolve a 10% change;
valgrind's callgrind counts instructions, which repeat to within 0.01% (with a fixed
PYTHONHASHSEED). Prints the start-up cost (an empty file) and the marginal cost per event
between the first N and the first M lines of the keep=5 workload of `bench.fold` — both
past the fold's warm-up. Needs valgrind (`apt-get install valgrind`); takes minutes (callgrind
runs ~50x slower than the program).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.workload import events

_COLLECTED = re.compile(rb"Collected : (\d+)")


def instructions(path: Path, engine: str) -> int:
    """Instructions executed by a whole `ckptlog fold FILE --workers 1 --engine ENGINE` process."""
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
            "processor.cli", "fold", str(path), "--workers", "1", "--no-progress", "--engine", engine]
    run = subprocess.run(argv, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True)
    found = _COLLECTED.search(run.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output: {run.stderr[-500:]!r}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=100_000, help="lines in the smaller log")
    parser.add_argument("--large", type=int, default=200_000, help="lines in the larger log")
    parser.add_argument("--engine", default="auto", help="auto, native or python (as `ckptlog fold --engine`)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("error: valgrind is not installed; install it (apt-get install valgrind) to count instructions")
    if not 0 < args.small < args.large:
        sys.exit("error: need 0 < --small < --large")
    with tempfile.TemporaryDirectory() as tmp:
        lines = list(events(args.large, 5, 0.1))[: args.large]
        counts = {}
        for n in (0, args.small, args.large):
            path = Path(tmp) / f"head-{n}.jsonl"
            path.write_bytes(b"".join(lines[:n]))
            counts[n] = instructions(path, args.engine)
            print(f"ckptlog fold --engine {args.engine}, first {n:,} lines of the keep=5 workload: "
                  f"{counts[n]:,} instructions", flush=True)
    per_event = (counts[args.large] - counts[args.small]) / (args.large - args.small)
    print(f"start-up (empty file): {counts[0] / 1e9:.3f}G instructions; marginal cost per event between "
          f"{args.small:,} and {args.large:,} lines: {per_event / 1e3:.1f}k instructions")


if __name__ == "__main__":
    main()

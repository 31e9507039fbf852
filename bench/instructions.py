"""Instruction counts of `ckptlog fold`: `python -m bench.instructions [--small N] [--large M] [--scaling]`.

This host's speed drifts by up to 2x within the hour, so seconds cannot resolve a 10% change;
valgrind's callgrind counts instructions, which repeat to within 0.01% (with a fixed
PYTHONHASHSEED). Prints the start-up cost (an empty file) and the marginal cost per event
between the first N and the first M lines of the keep=5 workload of `bench.fold` — both
past the fold's warm-up. Needs valgrind (`apt-get install valgrind`); takes minutes (callgrind
runs ~50x slower than the program).

`--scaling` is the deterministic form of bench.fold's keep=None scaling check: callgrind with
its cache simulation, whole processes over the first 20k/30k and 1M/1.01M reports of the
keep=None workload; the marginal cost of 10k reports at each size, in instructions, D1 and LL
misses and an estimate of cycles (Ir + 10 x D1 misses + 100 x LL misses, the usual rough
latencies). Takes ~15 minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.workload import events, write

_COLLECTED = re.compile(rb"Collected : (\d+)")
_SUMMARY = {
    name: re.compile(rb"== " + label + rb":\s+([\d,]+)")
    for name, label in (("ir", rb"I   refs"), ("d1", rb"D1  misses"), ("ll", rb"LL misses"))
}


def _fold_argv(path: Path) -> list[str]:
    return [sys.executable, "-m", "ckptlog.cli", "fold", str(path), "--workers", "1", "--no-progress"]


def cache_costs(path: Path) -> dict[str, int]:
    """Instructions, D1 and LL misses of a whole `ckptlog fold` process (callgrind --cache-sim)."""
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--cache-sim=yes",
        "--callgrind-out-file=/dev/null",
        *_fold_argv(path),
    ]
    run = subprocess.run(argv, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True)
    costs = {}
    for name, pattern in _SUMMARY.items():
        found = pattern.search(run.stderr)
        if found is None:
            raise RuntimeError(f"no {name} in callgrind's output: {run.stderr[-500:]!r}")
        costs[name] = int(found.group(1).replace(b",", b""))
    return costs


def scaling(small: int = 20_000, large: int = 1_000_000, step: int = 10_000) -> None:
    """Both processes of a size run at once (callgrind is single-threaded; this host has 2 cores)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "keep-none.jsonl"
        write(log, large + step, None, 0.0)
        lines = log.read_bytes().splitlines(keepends=True)
        runs = len(lines) - large - step  # the run_started lines at the head
        marginal = {}
        for n in (small, large):
            heads = []
            for size in (n, n + step):
                heads.append(Path(tmp) / f"head-{size}.jsonl")
                heads[-1].write_bytes(b"".join(lines[: runs + size]))
            with ThreadPoolExecutor(max_workers=2) as pool:
                costs = list(pool.map(cache_costs, heads))
            for head in heads:
                head.unlink()
            per = {k: (costs[1][k] - costs[0][k]) / step for k in costs[0]}
            per["cycles"] = per["ir"] + 10 * per["d1"] + 100 * per["ll"]
            marginal[n] = per
            print(
                f"keep=None, reports {n:,} -> {n + step:,}: per report {per['ir'] / 1e3:.1f}k "
                f"instructions, {per['d1']:.1f} D1 misses, {per['ll']:.2f} LL misses, ~{per['cycles'] / 1e3:.1f}k "
                "cycles (Ir + 10 D1 + 100 LL)",
                flush=True,
            )
    print(
        f"ratio at {large:,} / at {small:,}: instructions {marginal[large]['ir'] / marginal[small]['ir']:.2f}, "
        f"estimated cycles {marginal[large]['cycles'] / marginal[small]['cycles']:.2f}"
    )


def instructions(path: Path) -> int:
    """Instructions executed by a whole `ckptlog fold FILE --workers 1` process."""
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *_fold_argv(path)]
    run = subprocess.run(argv, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True)
    found = _COLLECTED.search(run.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output: {run.stderr[-500:]!r}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=100_000, help="lines in the smaller log")
    parser.add_argument("--large", type=int, default=200_000, help="lines in the larger log")
    parser.add_argument(
        "--scaling", action="store_true", help="keep=None marginal cost at 20k vs 1M, with cache simulation (see above)"
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("error: valgrind is not installed; install it (apt-get install valgrind) to count instructions")
    if args.scaling:
        scaling()
        return
    if not 0 < args.small < args.large:
        sys.exit("error: need 0 < --small < --large")
    with tempfile.TemporaryDirectory() as tmp:
        lines = list(events(args.large, 5, 0.1))[: args.large]
        counts = {}
        for n in (0, args.small, args.large):
            path = Path(tmp) / f"head-{n}.jsonl"
            path.write_bytes(b"".join(lines[:n]))
            counts[n] = instructions(path)
            print(
                f"ckptlog fold, first {n:,} lines of the keep=5 workload: {counts[n]:,} instructions",
                flush=True,
            )
    per_event = (counts[args.large] - counts[args.small]) / (args.large - args.small)
    print(
        f"start-up (empty file): {counts[0] / 1e9:.3f}G instructions; marginal cost per event between "
        f"{args.small:,} and {args.large:,} lines: {per_event / 1e3:.1f}k instructions"
    )


if __name__ == "__main__":
    main()

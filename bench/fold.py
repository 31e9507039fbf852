"""Benchmark of the fold: `python -m bench.fold [--reports N] [--only PART]`.

1. Whole process (throughput): `ckptlog fold FILE` on N reports at keep=5 (10% validations)
   and at keep=None, timed from process start to exit (what the issue's target is about), with
   one process and with one per core (`--workers`, runs sharded by id). Prints reports/s.
2. Scaling at keep=None: per-report cost over the last 10k reports of a 20k-report log vs of an
   N-report log (the same file's prefix), each in a fresh process, median over processes
   — O(log n) per event means the ratio stays near 1.
3. Against a naive reading (`--only naive`): `ckptlog fold FILE --workers 1` and bench/naive.py
   (json.loads, dicts and lists, full sorts) on the keep=5 log, alternating, 3 pairs; wall and
   CPU seconds of each whole process, and the naive's time over the fold's (>= 1: the fold is
   at least as fast per core).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

from bench.workload import write
from ckptlog.events.codec import decode_event
from ckptlog.processor.foldfile import fold_lines

TAIL = 10_000
CHUNK = 500
RUNS = 10  # bench/workload.py's default: the log starts with their run_started events


def whole_process(path: Path, reports: int, workers: int) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ckptlog.cli", "fold", str(path), "--workers", str(workers)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - start
    return reports / elapsed


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one child process, output discarded."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def against_naive(path: Path, reports: int, pairs: int = 3) -> None:
    """`ckptlog fold --workers 1` against bench/naive.py on the same file, alternating."""
    fold_argv = [sys.executable, "-m", "ckptlog.cli", "fold", str(path), "--workers", "1", "--no-progress"]
    naive_argv = [sys.executable, "-m", "bench.naive", str(path)]
    for pair in range(1, pairs + 1):
        (fold_wall, fold_cpu), (naive_wall, naive_cpu) = timed(fold_argv), timed(naive_argv)
        print(
            f"pair {pair}, {reports:,} reports keep=5: ckptlog fold --workers 1 {fold_wall:.2f} s wall "
            f"({fold_cpu:.2f} s CPU), naive reading {naive_wall:.2f} s wall ({naive_cpu:.2f} s CPU): "
            f"fold / naive speed {naive_wall / fold_wall:.2f}x wall, {naive_cpu / fold_cpu:.2f}x CPU",
            flush=True,
        )


def tail_cost_us(path: Path, reports: int, emit: bool, tail: int = TAIL) -> float:
    """Microseconds per report (median over chunks of 500) in the last `tail` of the first `reports` reports of the
    keep=None log at `path` (its first lines are the 10 run_started events); `emit`: build
    output events too, as the processor does (`ckptlog fold` does not)."""
    with path.open("rb") as stream:
        lines = list(islice(stream, reports + RUNS))
    head, last = lines[: len(lines) - tail], lines[len(lines) - tail :]
    result = fold_lines(head)
    fold = result.fold
    fold.emit = emit
    decoded = [decode_event(line) for line in last]
    gc.freeze()  # as `ckptlog fold` does every 64k lines
    apply, chunks = fold.apply, []
    for at in range(0, tail, CHUNK):  # the median chunk: robust to bursts of steal time on the VM
        start = time.perf_counter()
        for event in decoded[at : at + CHUNK]:
            apply(event)  # type: ignore[arg-type]
        chunks.append((time.perf_counter() - start) / CHUNK * 1e6)
    return statistics.median(chunks)


def in_fresh_process(path: Path, reports: int, *flags: str) -> list[float]:
    """One measurement (`--tail-of`) in its own process: no heap or page cache left by another."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.fold", "--tail-of", str(path), "--reports", str(reports), *flags],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [float(x) for x in out.split()]


def scaling(path: Path, n: int) -> None:
    """keep=None per-report cost at 20k vs at n: 3 fresh processes per size (with and without
    output events), alternating."""
    small_n = 2 * TAIL
    for emit, who in ((False, "ckptlog fold"), (True, "with output events, as the processor")):
        costs: dict[int, list[float]] = {small_n: [], n: []}
        for _ in range(3):  # alternate the sizes so drift on the machine hits both
            for size in costs:
                costs[size] += in_fresh_process(path, size, *(["--emit"] if emit else []))
        small, large = statistics.median(costs[small_n]), statistics.median(costs[n])
        print(
            f"keep=None cost per report (last 10k reports, median of 3 processes), {who}: "
            f"at 20k {small:.2f} us, at {n:,} {large:.2f} us, ratio {large / small:.2f} "
            f"(runs: {costs[small_n]} / {costs[n]})",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--tail-of", type=Path, help=argparse.SUPPRESS)  # internal: one scaling measurement
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=("throughput", "scaling", "naive"), help="run one part only")
    args = parser.parse_args()
    n = args.reports
    if args.tail_of is not None:
        print(f"{tail_cost_us(args.tail_of, n, args.emit):.3f}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.only == "naive":
            path = Path(tmp) / "keep-5.jsonl"
            write(path, n, 5, 0.1)
            against_naive(path, n)
            return
        for keep, share in ((5, 0.1), (None, 0.0)) if args.only != "scaling" else ((None, 0.0),):
            path = Path(tmp) / f"keep-{keep}.jsonl"
            lines = write(path, n, keep, share)
            for workers in sorted({1, os.cpu_count() or 1}) if args.only != "scaling" else []:
                rate = whole_process(path, n, workers)
                print(
                    f"ckptlog fold --workers {workers}, whole process, {n:,} reports "
                    f"({lines:,} events), keep={keep}, validations={share:.0%}: {rate:,.0f} reports/s",
                    flush=True,
                )
        if args.only != "throughput":
            scaling(path, n)


if __name__ == "__main__":
    main()

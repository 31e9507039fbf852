"""Benchmark of the fold: `python -m bench.fold [--reports N] [--engines E] [--only PART]`.

1. Whole process (throughput): `ckptlog fold FILE` on N reports at keep=5 (10% validations)
   and at keep=None, timed from process start to exit (what the issue's target is about), with
   one process and with one per core (`--workers`, runs sharded by id), for the compiled engine
   (when built) and the Python fold. Prints reports/s.
2. Scaling at keep=None: per-report cost over the last 10k reports of a 20k-report log vs of an
   N-report log (the same file's prefix), each in a fresh process, median over processes
   — O(log n) per event means the ratio stays near 1.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

from bench.workload import write
from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, decode_event
from processor import native
from processor.foldfile import fold_lines


TAIL = 10_000
CHUNK = 500
RUNS = 10  # bench/workload.py's default: the log starts with their run_started events


def whole_process(path: Path, reports: int, workers: int, engine: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "processor.cli", "fold", str(path), "--workers", str(workers),
                    "--engine", engine], check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    return reports / elapsed


def tail_cost_us(path: Path, reports: int, emit: bool, tail: int = TAIL) -> float:
    """Microseconds per report (median over chunks of 500) in the last `tail` of the first `reports` reports of the
    keep=None log at `path` (its first lines are the 10 run_started events); `emit`: build
    output events too, as the processor does (`ckptlog fold` does not)."""
    with path.open("rb") as stream:
        lines = list(islice(stream, reports + RUNS))
    head, last = lines[: len(lines) - tail], lines[len(lines) - tail:]
    result = fold_lines(head)
    fold = result.fold
    fold.emit = emit
    decoded = [decode_event(line) for line in last]
    gc.freeze()  # as `ckptlog fold` does every 64k lines
    apply, chunks = fold.apply, []
    for at in range(0, tail, CHUNK):  # the median chunk: robust to bursts of steal time on the VM
        start = time.perf_counter()
        for event in decoded[at:at + CHUNK]:
            apply(event)  # type: ignore[arg-type]
        chunks.append((time.perf_counter() - start) / CHUNK * 1e6)
    return statistics.median(chunks)


def native_tail_cost_us(path: Path, reports: int, tail: int = TAIL) -> float:
    """`tail_cost_us` for the compiled engine: microseconds per report over the last `tail`
    lines, fed as bytes (so decoding is included here, unlike the Python measurement)."""
    with path.open("rb") as stream:
        lines = list(islice(stream, reports + RUNS))
    head, last = lines[: len(lines) - tail], lines[len(lines) - tail:]
    engine = native.new_engine(None, max_bytes=DEFAULT_MAX_BYTES, max_depth=DEFAULT_MAX_DEPTH)
    engine.feed_lines(head)
    chunks = []
    for at in range(0, tail, CHUNK):
        batch = last[at:at + CHUNK]
        start = time.perf_counter()
        engine.feed_lines(batch)
        chunks.append((time.perf_counter() - start) / CHUNK * 1e6)
    return statistics.median(chunks)


def tail_in_fresh_process(path: Path, reports: int, emit: bool, engine: str = "python") -> float:
    """One tail cost in its own process: no heap or page cache left by an earlier size."""
    flags = ["--emit"] if emit else []
    if engine == "native":
        flags.append("--native")
    out = subprocess.run([sys.executable, "-m", "bench.fold", "--tail-of", str(path), "--reports", str(reports),
                          *flags], check=True, capture_output=True, text=True).stdout
    return float(out.strip())


def scaling(path: Path, n: int, engines: list[str]) -> None:
    """keep=None per-report cost at 20k vs at n: the median of fresh processes each — 3 for the
    Python fold (with and without output events), 7 for the compiled engine, whose 10k reports
    take ~25 ms, short enough for one burst of steal time on the VM to swing a process."""
    small_n = 2 * TAIL
    cases = [("native", False, "compiled engine, ckptlog fold (decoding included)", 7),
             ("python", False, "Python fold, ckptlog fold", 3),
             ("python", True, "Python fold with output events, as the processor", 3)]
    for engine, emit, who, repeats in cases:
        if engine not in engines:
            continue
        costs: dict[int, list[float]] = {small_n: [], n: []}
        for _ in range(repeats):  # alternate the sizes so drift on the machine hits both
            for size in costs:
                costs[size].append(tail_in_fresh_process(path, size, emit, engine))
        small, large = statistics.median(costs[small_n]), statistics.median(costs[n])
        print(f"keep=None cost per report (last 10k reports, median of {repeats} processes), {who}: "
              f"at 20k {small:.2f} us, at {n:,} {large:.2f} us, ratio {large / small:.2f} "
              f"(runs: {costs[small_n]} / {costs[n]})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--tail-of", type=Path, help=argparse.SUPPRESS)  # internal: one scaling measurement
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--native", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--engines", default="auto", help="auto (both when the compiled engine is built), "
                        "native or python")
    parser.add_argument("--only", choices=("throughput", "scaling"), help="run one part only")
    args = parser.parse_args()
    n = args.reports
    if args.tail_of is not None:
        cost = native_tail_cost_us(args.tail_of, n) if args.native else tail_cost_us(args.tail_of, n, args.emit)
        print(f"{cost:.3f}")
        return
    engines = [e for e in ("native", "python") if args.engines in ("auto", e) and (e == "python" or native.available())]
    with tempfile.TemporaryDirectory() as tmp:
        for keep, share in ((5, 0.1), (None, 0.0)) if args.only != "scaling" else ((None, 0.0),):
            path = Path(tmp) / f"keep-{keep}.jsonl"
            lines = write(path, n, keep, share)
            for engine in engines if args.only != "scaling" else []:
                for workers in sorted({1, os.cpu_count() or 1}):
                    rate = whole_process(path, n, workers, engine)
                    print(f"ckptlog fold --engine {engine} --workers {workers}, whole process, {n:,} reports "
                          f"({lines:,} events), keep={keep}, validations={share:.0%}: {rate:,.0f} reports/s",
                          flush=True)
        if args.only != "throughput":
            scaling(path, n, engines)


if __name__ == "__main__":
    main()

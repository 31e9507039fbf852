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
from typing import TYPE_CHECKING

from bench.workload import write
from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, decode_event
from processor import native
from processor.foldfile import fold_lines

if TYPE_CHECKING:
    import ckptlog_native


TAIL = 10_000
CHUNK = 500
RUNS = 10  # bench/workload.py's default: the log starts with their run_started events


def whole_process(path: Path, reports: int, workers: int, engine: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "processor.cli", "fold", str(path), "--workers", str(workers), "--engine", engine],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - start
    return reports / elapsed


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


def native_costs_us(path: Path, reports: int, tail: int = TAIL) -> tuple[float, float]:
    """For the compiled engine, in one process: microseconds per report (median 500-report
    chunk) over reports 10k–20k, then — folding on through the file, as `ckptlog fold` reads
    it — over the last `tail` of the first `reports`. Decoding is included (lines are fed as
    bytes), unlike the Python measurement. Both sizes in one process, seconds apart: the
    host's slow and fast phases (2x apart, minutes long) then hit a pair alike."""
    small = 2 * tail
    engine = native.new_engine(None, max_bytes=DEFAULT_MAX_BYTES, max_depth=DEFAULT_MAX_DEPTH)
    with path.open("rb") as stream, tempfile.TemporaryDirectory() as tmp:
        engine.feed_lines(list(islice(stream, RUNS + small - tail)))
        first = _timed_chunks(engine, list(islice(stream, tail)))
        middle = Path(tmp) / "middle.jsonl"
        with middle.open("wb") as out:
            out.writelines(islice(stream, reports - small - tail))
        engine.feed_file(str(middle))
        last = _timed_chunks(engine, list(islice(stream, tail)))
    return first, last


def _timed_chunks(engine: ckptlog_native.NativeFold, lines: list[bytes]) -> float:
    chunks = []
    for at in range(0, len(lines), CHUNK):
        batch = lines[at : at + CHUNK]
        start = time.perf_counter()
        engine.feed_lines(batch)
        chunks.append((time.perf_counter() - start) / len(batch) * 1e6)
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


def scaling(path: Path, n: int, engines: list[str]) -> None:
    """keep=None per-report cost at 20k vs at n. The Python fold: 3 fresh processes per size
    (with and without output events), alternating. The compiled engine, whose 10k reports take
    ~25 ms: 7 processes, each measuring both sizes (`native_costs_us`)."""
    if "native" in engines:
        pairs = [in_fresh_process(path, n, "--native") for _ in range(7)]
        small, large = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
        low, high = min(p[0] for p in pairs), min(p[1] for p in pairs)
        print(
            f"keep=None cost per report (last 10k reports, 7 processes each measuring both sizes), compiled "
            f"engine, ckptlog fold (decoding included): median at 20k {small:.2f} us, at {n:,} {large:.2f} us, "
            f"ratio {large / small:.2f}; fastest at 20k {low:.2f} us, at {n:,} {high:.2f} us, ratio "
            f"{high / low:.2f} (pairs: {', '.join(f'{a:.2f}/{b:.2f}' for a, b in pairs)})",
            flush=True,
        )
    if "python" not in engines:
        return
    small_n = 2 * TAIL
    for emit, who in ((False, "Python fold, ckptlog fold"), (True, "Python fold with output events, as the processor")):
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
    parser.add_argument("--native", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--engines", default="auto", help="auto (both when the compiled engine is built), native or python"
    )
    parser.add_argument("--only", choices=("throughput", "scaling"), help="run one part only")
    args = parser.parse_args()
    n = args.reports
    if args.tail_of is not None:
        costs = native_costs_us(args.tail_of, n) if args.native else (tail_cost_us(args.tail_of, n, args.emit),)
        print(" ".join(f"{cost:.3f}" for cost in costs))
        return
    engines = [e for e in ("native", "python") if args.engines in ("auto", e) and (e == "python" or native.available())]
    with tempfile.TemporaryDirectory() as tmp:
        for keep, share in ((5, 0.1), (None, 0.0)) if args.only != "scaling" else ((None, 0.0),):
            path = Path(tmp) / f"keep-{keep}.jsonl"
            lines = write(path, n, keep, share)
            for engine in engines if args.only != "scaling" else []:
                for workers in sorted({1, os.cpu_count() or 1}):
                    rate = whole_process(path, n, workers, engine)
                    print(
                        f"ckptlog fold --engine {engine} --workers {workers}, whole process, {n:,} reports "
                        f"({lines:,} events), keep={keep}, validations={share:.0%}: {rate:,.0f} reports/s",
                        flush=True,
                    )
        if args.only != "throughput":
            scaling(path, n, engines)


if __name__ == "__main__":
    main()

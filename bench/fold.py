"""Benchmark of the fold: `python -m bench.fold [--reports N]`. Prints reports/s.

1. Whole process: `ckptlog fold FILE` on N reports at keep=5 (10% validations) and at
   keep=None, timed from process start to exit (what the issue's target is about), with
   one process and with one per core (`--workers`, runs sharded by id).
2. Scaling at keep=None: in-process per-report cost over the last 10k reports of a 10k
   log vs of an N log — O(log n) per event means the ratio stays near 1.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.workload import events, write
from events.codec import decode_event
from processor.foldfile import fold_lines


def whole_process(path: Path, reports: int, workers: int) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "processor.cli", "fold", str(path), "--workers", str(workers)],
                   check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    return reports / elapsed


def tail_cost_us(reports: int, emit: bool, tail: int = 10_000) -> float:
    """Microseconds per report over the last `tail` reports of a `reports`-long keep=None log;
    `emit`: build output events too, as the processor does (`ckptlog fold` does not)."""
    lines = list(events(reports, None, 0.0))
    head, last = lines[: len(lines) - tail], lines[len(lines) - tail:]
    result = fold_lines(head)
    fold = result.fold
    fold.emit = emit
    gc.freeze()  # as `ckptlog fold` does every 64k lines
    decoded = [decode_event(line) for line in last]
    start = time.perf_counter()
    for event in decoded:
        fold.apply(event)  # type: ignore[arg-type]
    return (time.perf_counter() - start) / tail * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reports", type=int, default=1_000_000)
    args = parser.parse_args()
    n = args.reports
    with tempfile.TemporaryDirectory() as tmp:
        for keep, share in ((5, 0.1), (None, 0.0)):
            path = Path(tmp) / f"keep-{keep}.jsonl"
            lines = write(path, n, keep, share)
            for workers in sorted({1, os.cpu_count() or 1}):
                rate = whole_process(path, n, workers)
                print(f"ckptlog fold --workers {workers}, whole process, {n:,} reports ({lines:,} events), "
                      f"keep={keep}, validations={share:.0%}: {rate:,.0f} reports/s", flush=True)
    for emit, who in ((False, "ckptlog fold"), (True, "with output events, as the processor")):
        small, large = tail_cost_us(10_000 + 10_000, emit), tail_cost_us(n, emit)
        print(f"keep=None fold cost per report (last 10k reports), {who}: at 20k {small:.2f} us, "
              f"at {n:,} {large:.2f} us, ratio {large / small:.2f}", flush=True)


if __name__ == "__main__":
    main()

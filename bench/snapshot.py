"""Snapshot encode and decode against the deletion backlog: `python -m bench.snapshot [--events N]`.

The dense workload (bench.processor.dense_events: every report evicts one checkpoint) folded with
no deletion ever confirmed, as while the deleter lags behind the fold: the snapshot then holds one
outstanding eviction per report. The processor encodes each snapshot on its event loop
(ckptlog/processor/service/snapshotting.py), so this is time the fold does not get. Prints the median of
`--repeats` encodes and decodes (bytes, milliseconds), with the process's GC tuned as `ckptlog run`
tunes it.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.processor import dense_events
from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.processor import tune_gc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fold = Fold(FoldSettings())
    for line in dense_events(args.events, root="file:///bench/runs"):
        event = decode_event(line, None)
        if isinstance(event, Rejection):
            raise SystemExit(f"bench.snapshot: the workload's line was rejected: {event.message}")
        fold.apply(event)
    tune_gc()
    snapshot = of_fold(fold, "bench-in", 0, args.events)
    encodes, decodes, data = [], [], b""
    for _ in range(args.repeats):
        started = time.perf_counter()
        data = encode(snapshot)
        encodes.append(time.perf_counter() - started)
        started = time.perf_counter()
        decode(data)
        decodes.append(time.perf_counter() - started)
    backlog = sum(len(run.outstanding) for run in fold.runs.values())
    print(
        f"snapshot of {len(fold.runs)} runs, {backlog:,} outstanding evictions: {len(data):,} bytes; "
        f"encode {statistics.median(encodes) * 1e3:.0f} ms, decode {statistics.median(decodes) * 1e3:.0f} ms "
        f"(median of {args.repeats})"
    )


if __name__ == "__main__":
    main()

"""Runs that end (issue 24, item 3): `python -m bench.lifecycle --runs 1000000 --active 1000`.

Churn: runs are started, report 5 checkpoints each (num_to_keep 2, so 3 evictions per run, each
settled by a deletion_completed right away, as the processor's Deleter would) and finish, with
`--active` runs open at any moment: at tick t run t starts, its i-th report comes at tick
t + i * active / 6, and it finishes at tick t + active. The events are built as the decoded
Structs the fold reads (decoding is not in the measurement) and folded by one `Fold(emit=True)`,
as in the processor.

Against a baseline: a fresh processor that only ever saw the runs still active at the end (the
same events of those runs, nothing else). Each side runs in a process of its own (`--side`), so
its RSS (VmRSS after a gc) is its own; it reports how many finished records remain and how many
expired (`FoldSettings.finished_runs_kept`, 10,000 by default); then the partition's snapshot is
encoded (bytes, time) and decoded and rebuilt into a fold (restore time, best of 3).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from ckptlog.events.decoded import (
    CheckpointConfig,
    CheckpointRef,
    CompletedPath,
    DecodedEvent,
    DeletionCompleted,
    DeletionCompletedData,
    Report,
    ReportData,
    RunFinished,
    RunFinishedData,
    RunStarted,
    RunStartedData,
)
from ckptlog.processor.core import Fold
from ckptlog.processor.core.snapshot import decode, encode, of_fold

ROOT = "file:///bench/runs"
REPORTS = 5
_SOURCE, _TIME = "bench", "2026-12-02T12:00:00Z"


def _started(run: str) -> RunStarted:
    data = RunStartedData(f"{ROOT}/{run}", CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="acc"))
    return RunStarted(id=f"{run}/s", subject=run, data=data, specversion="1.0", source=_SOURCE, time=_TIME)


def _report(run: str, i: int) -> Report:
    data = ReportData({"acc": (i * 7) % 5, "step": i}, CheckpointRef(f"{ROOT}/{run}/ckpt-{i}"))
    return Report(id=f"{run}/r{i}", subject=run, data=data, specversion="1.0", source=_SOURCE, time=_TIME)


def _finished(run: str) -> RunFinished:
    return RunFinished(
        id=f"{run}/f", subject=run, data=RunFinishedData(), specversion="1.0", source=_SOURCE, time=_TIME
    )


def schedule(runs: int, active: int) -> Iterator[tuple[int, str, int]]:
    """(run number, kind, report number) in log order; kind is s(tart), r(eport) or f(inish)."""
    gap = max(1, active // (REPORTS + 1))
    for tick in range(runs + active):
        if tick < runs:
            yield tick, "s", 0
        for i in range(REPORTS):
            run = tick - (i + 1) * gap
            if 0 <= run < runs:
                yield run, "r", i
        if 0 <= tick - active < runs:
            yield tick - active, "f", 0


def fold_side(runs: int, active: int, baseline: bool) -> dict[str, Any]:
    """Fold the churn (or, `baseline`, only the events of the runs still open at its end)."""
    fold, events, settled = Fold(), 0, 0
    open_from = runs - active  # the runs not finished at the end: the last `active` ones
    begin = time.perf_counter()
    for number, kind, i in schedule(runs, active):
        if baseline and number < open_from:
            continue
        if kind == "f" and number >= open_from:
            continue  # still active at the end: the schedule finishes it later
        run = f"run-{number:07d}"
        event: DecodedEvent = _started(run) if kind == "s" else _report(run, i) if kind == "r" else _finished(run)
        effects = fold.apply(event)
        events += 1
        assert effects.rejection is None, effects.rejection
        if effects.deletions:  # the Deleter: every eviction settled at once
            done = [CompletedPath(d.path, d.eviction) for d in effects.deletions]
            settle = DeletionCompleted(
                id=f"{run}/d{i}",
                subject=run,
                data=DeletionCompletedData(done),
                specversion="1.0",
                source=_SOURCE,
                time=_TIME,
            )
            assert fold.apply(settle).rejection is None
            events, settled = events + 1, settled + len(done)
    elapsed = time.perf_counter() - begin
    gc.collect()
    rss = _rss()
    snap, hot = of_fold(fold, "t", 0, events), fold.runs.values()
    t0 = time.perf_counter()
    data = encode(snap)
    write_s = time.perf_counter() - t0
    restore_s = min(_restore(data) for _ in range(3))
    return {
        "side": "baseline" if baseline else "churn",
        "runs_seen": runs if not baseline else min(runs, active),
        "hot_runs": len(fold.runs),
        "finished_records": len(fold.finished),
        "finished_runs_kept": fold.settings.finished_runs_kept,
        # run_finished folded, minus the records kept and the finished runs still owing deletions
        "finished_expired": fold.finishes - len(fold.finished) - sum(r.finished is not None for r in hot),
        "events": events,
        "deletions_settled": settled,
        "fold_s": round(elapsed, 2),
        "rss_mib": round(rss / 2**20, 1),
        "snapshot_bytes": len(data),
        "snapshot_encode_s": round(write_s, 3),
        "restore_s": round(restore_s, 3),
    }


def _restore(data: bytes) -> float:
    t0 = time.perf_counter()
    snap = decode(data)
    Fold(snap.settings, snap.runs, refused=snap.refused, finished=snap.finished, retired=snap.retired)
    return time.perf_counter() - t0


def _rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def compare(runs: int, active: int) -> dict[str, Any]:
    """Both sides, each in a process of its own, and their ratios."""
    sides = {}
    for side in ("baseline", "churn"):
        cmd = [sys.executable, "-m", "bench.lifecycle", "--side", side, "--runs", str(runs), "--active", str(active)]
        sides[side] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    base, churn = sides["baseline"], sides["churn"]
    ratios = {k: round(churn[k] / base[k], 2) for k in ("rss_mib", "snapshot_bytes", "restore_s") if base[k]}
    per_finished = (churn["snapshot_bytes"] - base["snapshot_bytes"]) / max(1, churn["finished_records"])
    return {"runs": runs, "active": active, **sides, "ratio": ratios, "snapshot_bytes_per_finished_run": per_finished}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000, help="runs started, reported and finished")
    parser.add_argument("--active", type=int, default=1_000, help="runs open at any moment")
    parser.add_argument("--side", choices=["baseline", "churn"], help="one side only (what compare runs)")
    args = parser.parse_args()
    if args.side:
        print(json.dumps(fold_side(args.runs, args.active, args.side == "baseline")))
    else:
        print(json.dumps(compare(args.runs, args.active), indent=1))


if __name__ == "__main__":
    main()

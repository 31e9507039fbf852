"""Memory at fleet scale (issue 39 item 3): `python -m bench.fleet --runs 10000 --reports 5000 --keep 5`.

One process holds the fold's state of `--runs` concurrent runs, as the processor does (`Fold`;
outputs are not built, which changes no state: tests/unit/core/test_fold_properties.py): each
run's run_started, then `--reports` checkpoint reports per run, round robin over the runs (report
i of every run, then i + 1), every eviction's deletion completed as the Deleter would (a numbered
`deletion_completed`, contract §9). Events are built as the decoder would return them (no JSON),
so the figures are the state's, not the input's. Ids are those of ckptlog's clients (`--ids
structured`: `ck1:r:0:{index}:{run}`, contract §3 "Deduplication") or foreign ones (`rep-{n}-{i}`).
`--validated`: every report asks for validation and an Evaluator's result follows it, named as the
Evaluator names it (`ck1:v:ckptlog.events:0:1:{offset}:{run}`, the offset of the report in the input
partition, all three records of a round taking offsets: out of order for its producer, contract §3)
or foreign (`val-{n}-{i}`).

Prints, once the state is built and a gc has run, the process's VmRSS and peak (VmHWM), the
growth over the process before the fold, per run, and what the runs' dedup state holds
(`Seen`: sys.getsizeof of its objects). `--reports 1` is a fresh run (its start and one report).
`--base`: then a base snapshot is taken as the processor takes one (`Capture`, its runs' entries kept
for the next base: core/delta.py `Encodings`), its bytes dropped, and VmRSS measured again: what
the kept entries cost (`kept_mib`; `kept_objects_mib`: their objects' sizes, as RSS may reuse memory
freed before), with the base's size.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

from ckptlog.events.decoded import (
    CheckpointConfig,
    CheckpointRef,
    CompletedPath,
    DeletionCompleted,
    DeletionCompletedData,
    Report,
    ReportData,
    RunStarted,
    RunStartedData,
    ValidationResult,
    ValidationResultData,
)
from ckptlog.processor.core.dedup import Seen
from ckptlog.processor.core.delta import Capture, Encodings
from ckptlog.processor.core.fold import Fold

ROOT = "file:///bench/fleet"


def status(field: str) -> int:
    """A VmRSS-like field of /proc/self/status, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def run_id(n: int) -> str:
    return f"run-{n:06d}"


def start(fold: Fold, runs: int, keep: int | None) -> None:
    config = CheckpointConfig(num_to_keep=keep, checkpoint_score_attribute="val/acc")
    for n in range(runs):
        data = RunStartedData(storage_path=f"{ROOT}/{run_id(n)}", checkpoint_config=config)
        _applied(fold, RunStarted(specversion="1.0", id=f"start-{n}", source="bench", subject=run_id(n), data=data))


def report(fold: Fold, n: int, i: int, ids: str, *, runs: int = 1, validated: bool = False) -> None:
    """Report i of run n (metrics as bench/workload.py's), its validation result if `validated`, then
    every deletion it made, completed."""
    run = run_id(n)
    metrics = {"val": {"acc": (n * 31 + i * 7) % 1009 / 1009}, "loss": 1.0 / (i + 1), "step": i}
    path = f"{ROOT}/{run}/ckpt-{i:06d}"
    data = ReportData(metrics=metrics, checkpoint=CheckpointRef(path=path), validation=validated)
    event_id = f"ck1:r:0:{i}:{run}" if ids == "structured" else f"rep-{n}-{i}"
    effects = _applied(fold, Report(specversion="1.0", id=event_id, source="bench", subject=run, data=data))
    deletions = list(effects.deletions)
    if validated:
        offset = 3 * (i * runs + n)  # the report's offset: each run's report, result and completion in a round
        result_id = f"ck1:v:ckptlog.events:0:1:{offset}:{run}" if ids == "structured" else f"val-{n}-{i}"
        result = ValidationResultData(checkpoint_path=path, status="VALIDATED", metrics={"val": {"score": 1.0}})
        event = ValidationResult(specversion="1.0", id=result_id, source="bench", subject=run, data=result)
        deletions += _applied(fold, event).deletions
    for d in deletions:
        done = DeletionCompletedData(deleted=[CompletedPath(checkpoint_path=d.path, eviction=d.eviction)])
        _applied(
            fold, DeletionCompleted(specversion="1.0", id=f"deleted:{run}:{i}", source="bench", subject=run, data=done)
        )


def _applied(fold: Fold, event: Any) -> Any:
    effects = fold.apply(event)
    if effects.rejection is not None:
        raise RuntimeError(f"rejected: {effects.rejection.message}")
    return effects


def dedup_bytes(seen: Seen) -> int:
    """What one run's dedup state holds: the object, its marks and their blocks, the foreign ids."""
    marks = sum(sys.getsizeof(p) + sys.getsizeof(m) + sys.getsizeof(m.blocks) for p, m in seen.marks.items())
    blocks = sum(
        sys.getsizeof(b) + sys.getsizeof(b.ids) + sys.getsizeof(b.base) + sys.getsizeof(b.stamp)
        for m in seen.marks.values()
        for b in m.blocks or ()
    )
    foreign = sys.getsizeof(seen.foreign) + sys.getsizeof(seen.foreign_set) + sum(map(sys.getsizeof, seen.foreign))
    return sys.getsizeof(seen) + sys.getsizeof(seen.marks) + marks + blocks + foreign + sys.getsizeof(seen.expect)


def kept_cost(fold: Fold, rss: int) -> dict[str, Any]:
    """A base taken with its entries kept (`--base`): its size, the peak while taken, VmRSS after."""
    kept = Encodings()
    capture = Capture(fold, "bench", 0, 1, None, kept)
    while capture.step():
        pass
    size = len(capture.encoded())
    capture.keep()
    del capture
    gc.collect()
    after = status("VmRSS")
    entries = kept.take(fold, {})
    held = sys.getsizeof(entries) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in entries.items())
    kept.keep(fold, entries)
    assert len(kept) == len(fold.runs)
    return {
        "base_mib": size / 2**20,
        "kept_objects_mib": held / 2**20,  # sys.getsizeof of the entries kept and their dict
        "rss_kept_mib": after / 2**20,
        "kept_mib": (after - rss) / 2**20,
    }


def build(
    runs: int, reports: int, keep: int | None, ids: str, *, validated: bool = False, base: bool = False
) -> dict[str, Any]:
    gc.collect()
    idle, started = status("VmRSS"), time.perf_counter()
    fold = Fold(emit=False, track_changes=base)
    gc.disable()  # as the processor tunes its gc (rare full passes); collected once at the end
    start(fold, runs, keep)
    for i in range(reports):
        for n in range(runs):
            report(fold, n, i, ids, runs=runs, validated=validated)
        if i % max(1, reports // 20) == 0:
            print(f"report {i:,} of every run: {status('VmRSS') / 2**20:,.0f} MiB", file=sys.stderr, flush=True)
    gc.enable()
    gc.collect()
    rss = status("VmRSS")
    states = fold.runs.values()
    seconds = time.perf_counter() - started
    kept = kept_cost(fold, rss) if base else {}
    return {
        "runs": runs,
        "reports_per_run": reports,
        "keep": keep,
        "ids": ids,
        "validated": validated,
        "kept": sum(len(r.checkpoints) for r in states),
        "outstanding": sum(len(r.outstanding) for r in states),  # 0: every deletion was completed
        "rss_mib": rss / 2**20,
        "peak_mib": status("VmHWM") / 2**20,
        "idle_mib": idle / 2**20,
        "per_run_kib": (rss - idle) / runs / 1024,
        "dedup_per_run_b": sum(dedup_bytes(r.seen) for r in states) / runs,
        "seconds": seconds,
        **kept,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--reports", type=int, default=5_000, help="checkpoint reports per run (1: fresh runs)")
    parser.add_argument("--keep", type=int, default=5, help="num_to_keep (0: keep every checkpoint)")
    parser.add_argument("--ids", choices=("structured", "foreign"), default="structured")
    parser.add_argument("--validated", action="store_true", help="an Evaluator's result after every report")
    parser.add_argument("--base", action="store_true", help="then a base, its entries kept: their RSS")
    args = parser.parse_args()
    built = build(args.runs, args.reports, args.keep or None, args.ids, validated=args.validated, base=args.base)
    print(json.dumps(built), flush=True)


if __name__ == "__main__":
    main()

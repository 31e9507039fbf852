"""Incremental snapshots, offline (issue 39 items 2-3): `python -m bench.incremental [--runs 10000]`.

1. bytes: a fold of `--runs` long-lived runs (run_started, `--reports` reports each with a
   checkpoint, keep 5, every eviction settled at once as the Deleter would); its full snapshot, then
   `--changed` runs (spread over the fleet) report once more and the delta on it is taken: the
   delta's bytes against the full one's (target: at most 5%), both encode times, and the check that
   base + delta restore to a full snapshot of that moment, byte for byte.
2. stall: the longest the event loop waits beyond a 1 ms sleep (a loop-lag probe) while a snapshot of
   that state is taken and written to a local directory, events folding meanwhile in batches of 50
   (one `await` between batches, as the processor folds): with no snapshot (the fold's own share),
   encoded as before issue 39 (the whole state in one call on the loop, then written by a thread),
   and as now (`SnapshotScheduler`: slices of at most 4 ms, copy on write), a base and a delta.
   Target: at most 20 ms. `rebase`: a base on a scheduler that took one just before, the fold going on
   meanwhile to `--changed` runs only (the runs unchanged since are written from their bytes kept).

5. base (`--only base`): the event loop's total CPU time (its thread's, nothing else on the loop) to
   take and write a base of the `--runs` fleet: cold (the scheduler's first snapshot: every run
   encoded) and warm (a base right after another snapshot, `--changed` runs changed since).

3. restore (`--only restore`): `--restore-runs` (100,000) fresh runs (run_started and one report with
   a checkpoint each, default settings: the broker bench's restore workload), their base snapshot, then
   the CPU time (of this process, the cyclic GC paused as a restore pauses it) from its bytes to a Fold
   ready, in parts: open (parse and verify the checksum), run states (every run entry turned into a
   RunState: a dormant one since branch i39-lazy, built on first use), fold (the restored Fold built: every
   run's root registered); median and best of `--repeats`. Then, apart, the CPU time to read a field of
   every run ("touch"): the work a restore now defers to a run's first use (near nothing on older trees).
   It imports only what older trees have too, so the same measurement runs on one for a before/after:
   `git archive REV | tar -x -C DIR && cp bench/incremental.py DIR/bench/ && cd DIR && python -m
   bench.incremental --only restore`. With `restore,store`, also that base read back through a
   `SnapshotStore` in a temporary directory, `load_latest(decode_chain)` as a restore reads it (read,
   hashed against its name, opened, its chain's links): its CPU time, median and best of `--repeats`.

4. final (`--only final`): the last snapshot of a revocation or a stop, of `--restore-runs` runs
   (run_started and one report each) whose chain is at its bound (`max_deltas` 1: a base and one
   delta) when `--changed` runs have reported since: wall time of `SnapshotScheduler.start` to the
   object written to a local directory, scheduled (a base: the chain is full) and final (a delta:
   compaction waits for the next owner), from the same state.

The broker-backed figures (restore of 100,000 runs, latency while snapshots are written) are
bench/incremental_broker.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core.delta import Capture, decode_chain
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import (
    Raw,
    canonical,
    encode,
    of_fold,
    opened,
    run_out,
    seal,
    snapshot_in,
)
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.processor import tune_gc
from ckptlog.processor.service.restore import paused_gc, restored_fold
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.snapshots import SnapshotStore

ROOT = "file:///bench/fleet"
PID = PartitionId("bench-in", 0)


def _line(eid: str, kind: str, run: str, data: dict[str, Any]) -> bytes:
    envelope = {"specversion": "1.0", "id": eid, "source": "bench", "type": f"ckptlog.{kind}.v1", "subject": run}
    return json.dumps({**envelope, "data": data}, separators=(",", ":")).encode()


def fleet_id(number: int) -> str:
    return f"fleet-{number:06d}"


def fleet(runs: int, reports: int, root: str = ROOT) -> Iterator[bytes]:
    """Each run's run_started (keep 5 by val/acc), then `reports` rounds of one report per run."""
    config = {"num_to_keep": 5, "checkpoint_score_attribute": "val/acc"}
    for n in range(runs):
        run = fleet_id(n)
        yield _line(f"{run}/s", "run_started", run, {"storage_path": f"{root}/{run}", "checkpoint_config": config})
    for step in range(reports):
        for n in range(runs):
            yield report(fleet_id(n), step, root)


def report(run: str, step: int, root: str = ROOT) -> bytes:
    metrics = {"val": {"acc": round(((step * 7919) % 1000) / 1000, 3)}, "loss": 1 / (step + 1), "step": step}
    data = {"metrics": metrics, "checkpoint": {"path": f"{root}/{run}/ckpt-{step:06d}"}}
    return _line(f"{run}/r{step}", "report", run, data)


def fresh(runs: int, root: str) -> list[bytes]:
    """Every run's run_started (keep 5) and one report with a checkpoint."""
    config = {"num_to_keep": 5, "checkpoint_score_attribute": "acc"}
    lines = []
    for n in range(runs):
        run = f"new-{n:07d}"
        started = {"storage_path": f"{root}/{run}", "checkpoint_config": config}
        lines.append(_line(f"{run}/s", "run_started", run, started))
    for n in range(runs):
        lines.append(report(f"new-{n:07d}", 0, root))
    return lines


def apply(fold: Fold, line: bytes) -> None:
    """Fold one line; its evictions settled at once by a deletion_completed (as the Deleter would)."""
    event = decode_event(line, None)
    if isinstance(event, Rejection):
        raise SystemExit(f"bench.incremental: a workload line was rejected: {event.message}")
    effects = fold.apply(event)
    if effects.deletions:
        deleted = [{"checkpoint_path": d.path, "eviction": d.eviction} for d in effects.deletions]
        done = _line(f"{event.id}/done", "deletion_completed", event.subject, {"deleted": deleted, "refused": []})
        settled = decode_event(done.replace(b".deletion_completed.v1", b".deletion_completed.v3"), None)
        assert not isinstance(settled, Rejection), settled
        fold.apply(settled)


def fleet_fold(runs: int, reports: int) -> Fold:
    fold = Fold(FoldSettings(), track_changes=True)
    for line in fleet(runs, reports):
        apply(fold, line)
    return fold


def taken(capture: Capture) -> tuple[bytes, float]:
    started = time.perf_counter()
    while capture.step():
        pass
    data = capture.encoded()
    return data, time.perf_counter() - started


def change(fold: Fold, runs: int, changed: int, step: int) -> None:
    """`changed` runs spread over the fleet report once more."""
    for n in range(0, runs, max(1, runs // changed)):
        apply(fold, report(fleet_id(n), step))


def sizes(fold: Fold, runs: int, changed: int, step: int) -> dict[str, Any]:
    full, full_s = taken(Capture(fold, PID.topic, PID.partition, 1, None))
    base = decode_chain([full])
    change(fold, runs, changed, step)
    delta, delta_s = taken(Capture(fold, PID.topic, PID.partition, 2, base.chain))
    assert encode(decode_chain([full, delta])) == encode(of_fold(fold, PID.topic, PID.partition, 2)), "not exact"
    ratio = len(delta) / len(full)
    print(
        f"bytes: {runs:,} runs, {changed} changed: full {len(full):,} B (encoded in {full_s * 1e3:.0f} ms), "
        f"delta {len(delta):,} B ({delta_s * 1e3:.1f} ms) = {ratio:.2%} of the full one (target <= 5%); "
        "base + delta == full, byte for byte",
        flush=True,
    )
    return {"full": len(full), "delta": len(delta), "ratio": ratio, "full_s": full_s, "delta_s": delta_s}


class Probe:
    """The loop's lag: how late a 1 ms sleep wakes (`worst`, wall time: on a loaded host this
    includes the time the OS gave the process no core), and the loop thread's CPU time spent
    meanwhile (`worst_cpu`: the work that ran before the probe could, whatever the host does)."""

    def __init__(self) -> None:
        self.worst = self.worst_cpu = 0.0
        self.stopped = False

    def reset(self) -> None:
        self.worst = self.worst_cpu = 0.0

    async def run(self) -> None:
        while not self.stopped:
            started, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            self.worst = max(self.worst, time.perf_counter() - started - 0.001)
            self.worst_cpu = max(self.worst_cpu, time.thread_time() - cpu)


async def _folding(fold: Fold, runs: int, stop: asyncio.Event, step: int) -> None:
    """Reports to the fleet, 50 per batch, yielding between batches (the fold going on)."""
    n = 0
    while not stop.is_set():
        for _ in range(50):
            apply(fold, report(fleet_id(n % runs), step + n // runs))
            n += 1
        await asyncio.sleep(0)


def before(fold: Fold, store: SnapshotStore, offset: int) -> Any:
    """As before issue 39: the whole state encoded in one call on the loop, then written by a thread."""
    from ckptlog.processor.core.settings_codec import settings_out  # here: `--only restore` runs on older trees

    snapshot = of_fold(fold, PID.topic, PID.partition, offset)
    body = {
        "processor_version": snapshot.processor_version,
        "topic": snapshot.topic,
        "partition": snapshot.partition,
        "next_offset": offset,
        "settings": settings_out(snapshot.settings),
        "runs": {run_id: run_out(run) for run_id, run in snapshot.runs.items()},
        "refused": snapshot.refused,
        "finished": snapshot.finished,
    }
    data = seal(Raw([canonical(body)]))
    return asyncio.to_thread(store.write, data, offset)


async def base_cpu(fold: Fold, runs: int, changed: int) -> dict[str, float]:
    """The loop thread's CPU time to take and write a base, cold and warm (module docstring, part 5)."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scheduler = SnapshotScheduler(PID, SnapshotStore(tmp, PID.topic, PID.partition, keep=10), 1, 3600, None)
        for offset, kind in enumerate(("cold", "warm"), 1):
            change(fold, runs, changed, 20_000 + offset)
            cpu = time.thread_time()
            assert scheduler.start(fold, offset)
            await scheduler.wait()
            out[kind] = time.thread_time() - cpu
            assert scheduler.chain is not None and scheduler.chain.deltas == 0, scheduler.chain
    print(
        f"base: {runs:,} runs, loop CPU to take and write a base: cold {out['cold'] * 1e3:.0f} ms, "
        f"warm ({changed} runs changed since the previous snapshot) {out['warm'] * 1e3:.1f} ms",
        flush=True,
    )
    return out


async def stall(
    fold: Fold, runs: int, directory: Path, mode: str, offset: int, changed: int
) -> tuple[float, float, float]:
    """The worst loop lag (wall, CPU) while one snapshot (`mode`) is taken and written, and how long that took."""
    store = SnapshotStore(str(directory / mode), PID.topic, PID.partition, keep=100)
    scheduler = SnapshotScheduler(PID, store, 1, 3600, None, max_deltas=8)
    if mode in ("delta", "rebase"):  # a base first, written before measuring
        scheduler.max_deltas = 0 if mode == "rebase" else 8
        scheduler.start(fold, offset - 1)
        await scheduler.wait()
    probe, stop = Probe(), asyncio.Event()
    folded = changed if mode == "rebase" else runs
    tasks = [asyncio.create_task(probe.run()), asyncio.create_task(_folding(fold, folded, stop, 10_000 + offset))]
    await asyncio.sleep(0.2)  # settle: the fold's own lag is in every row
    probe.reset()
    started = time.perf_counter()
    if mode == "before":
        await before(fold, store, offset)
    elif mode == "none":
        await asyncio.sleep(1.0)
    else:
        scheduler.start(fold, offset)
        await scheduler.wait()
    elapsed, worst, worst_cpu = time.perf_counter() - started, probe.worst, probe.worst_cpu
    stop.set()
    probe.stopped = True
    await asyncio.gather(*tasks)
    return worst, worst_cpu, elapsed


async def stalls(fold: Fold, runs: int, changed: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for offset, mode in enumerate(("none", "before", "base", "delta", "rebase"), 10):
            worst, worst_cpu, elapsed = await stall(fold, runs, Path(tmp), mode, offset * 10, changed)
            out[mode] = {"stall_ms": worst * 1e3, "stall_cpu_ms": worst_cpu * 1e3, "seconds": elapsed}
            print(
                f"stall: {mode:<6} longest loop stall {worst * 1e3:6.1f} ms wall, {worst_cpu * 1e3:6.1f} ms of the "
                f"loop's CPU (snapshot taken and written in {elapsed:.2f} s; events folding meanwhile)",
                flush=True,
            )
    return out


def _cpu(parts: dict[str, list[float]], part: str, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`work(*args, **kwargs)`, its CPU time appended to `parts[part]`, the cyclic GC paused (as a restore decodes)."""
    with paused_gc():
        started = time.process_time()
        out = work(*args, **kwargs)
        parts.setdefault(part, []).append(time.process_time() - started)
        return out


def _restored(data: bytes, parts: dict[str, list[float]]) -> Fold:
    version, body = _cpu(parts, "open", opened, data, name="bench")
    snapshot = _cpu(parts, "run states", snapshot_in, body, version)
    fold: Fold = _cpu(parts, "fold", restored_fold, snapshot, snapshot.settings, track=True)
    _cpu(parts, "touch", _touch, fold)
    return fold


def _touch(fold: Fold) -> int:
    """A field of every run read: what a restore defers (a run built on first use) is paid here."""
    return sum(run.report_count for run in fold.runs.values())


def load_latest(data: bytes, runs: int, repeats: int) -> None:
    """`data` as a stored base, read back as a restore reads it: its CPU time (the cyclic GC paused)."""
    with tempfile.TemporaryDirectory() as directory:
        store = SnapshotStore(directory, PID.topic, PID.partition)
        store.write(data, 2 * runs)
        times: list[float] = []
        for _ in range(repeats):
            snapshot = _cpu({"load": times}, "load", store.load_latest, decode_chain)
            assert snapshot is not None and len(snapshot.runs) == runs
            del snapshot
    print(
        f"store: load_latest(decode_chain) of that base: {statistics.median(times):.3f} s CPU "
        f"(median of {repeats}; best {min(times):.3f} s)",
        flush=True,
    )


async def final_parts(runs: int, changed: int) -> None:
    """A chain at its bound and `changed` runs changed since: the next snapshot scheduled, and final."""
    fold = fleet_fold(runs, 1)
    tune_gc()
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        store = SnapshotStore(directory, PID.topic, PID.partition, keep=10)
        scheduler = SnapshotScheduler(PID, store, 1, 3600, None, max_deltas=1)
        for offset in (1, 2):  # a base, then a delta on it: the chain is full
            change(fold, runs, changed, offset + 1)
            assert scheduler.start(fold, offset)
            await scheduler.wait()
        change(fold, runs, changed, 9)
        full, since = scheduler.chain, dict(fold.changed or {})
        for kind, final in (("scheduled", False), ("final", True)):
            scheduler.chain, fold.changed = full, dict(since)
            started = time.perf_counter()
            assert scheduler.start(fold, 3 if final else 4, final=final)
            await scheduler.wait()
            seconds[kind] = time.perf_counter() - started
            assert scheduler.chain is not None and (scheduler.chain.deltas > 0) == final, scheduler.chain
    print(
        f"final: {runs:,} runs, {changed} changed since a full chain: scheduled (a base) "
        f"{seconds['scheduled']:.2f} s, final (a delta) {seconds['final']:.3f} s (wall, written locally)",
        flush=True,
    )


def restore_parts(runs: int, repeats: int, store: bool = False) -> dict[str, Any]:
    """A base snapshot of `runs` fresh runs, back to a Fold ready: the CPU time of each part."""
    fold = Fold(FoldSettings(), track_changes=True)
    for line in fresh(runs, ROOT):
        apply(fold, line)
    data = encode(of_fold(fold, PID.topic, PID.partition, 2 * runs))
    del fold
    tune_gc()
    parts: dict[str, list[float]] = {}
    for _ in range(repeats):
        restored = _restored(data, parts)
        assert len(restored.runs) == runs, len(restored.runs)
        del restored
    if store:
        load_latest(data, runs, repeats)
    touched = parts.pop("touch")
    totals = [sum(times) for times in zip(*parts.values(), strict=True)]
    medians = {name: statistics.median(times) for name, times in parts.items()}
    shown = ", ".join(f"{name} {seconds:.3f} s" for name, seconds in medians.items())
    print(
        f"restore: {runs:,} runs, base {len(data):,} B ({len(data) / runs:,.0f} B a run) -> Fold ready: "
        f"{statistics.median(totals):.3f} s CPU (median of {repeats}; best {min(totals):.3f} s) = {shown}; "
        f"then every run touched (a field of each read: what is built on first use is built): "
        f"{statistics.median(touched):.3f} s more (best {min(touched):.3f} s)",
        flush=True,
    )
    return {"bytes": len(data), "total": statistics.median(totals), **medians, "touch": statistics.median(touched)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--reports", type=int, default=20, help="reports per run before the snapshots")
    parser.add_argument("--changed", type=int, default=100, help="runs changed between the two snapshots")
    parser.add_argument("--only", default="bytes,stall")
    parser.add_argument("--restore-runs", type=int, default=100_000, help="restore: fresh runs in the base")
    parser.add_argument("--repeats", type=int, default=3, help="restore: decodes timed")
    args = parser.parse_args()
    if "restore" in args.only:
        restore_parts(args.restore_runs, args.repeats, store="store" in args.only)
    if "final" in args.only:
        asyncio.run(final_parts(args.restore_runs, args.changed))
    if not {"bytes", "stall", "base"} & set(args.only.split(",")):
        return
    started = time.perf_counter()
    fold = fleet_fold(args.runs, args.reports)
    tune_gc()
    print(f"fleet: {args.runs:,} runs x {args.reports} reports folded in {time.perf_counter() - started:.0f} s")
    if "bytes" in args.only:
        sizes(fold, args.runs, args.changed, args.reports)
    if "stall" in args.only:
        asyncio.run(stalls(fold, args.runs, args.changed))
    if "base" in args.only:
        asyncio.run(base_cpu(fold, args.runs, args.changed))


if __name__ == "__main__":
    main()

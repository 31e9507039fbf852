"""Scale measurements (issue 16, item 3): `python -m bench.scale [--only partitions,memory]`.

1. Partitions: an input topic with 4 partitions, processed by 1 and by 2 `ckptlog run`
   processes in one consumer group (exactly_once). The processes start on the empty topic; once
   the group's assignment has settled they are paused (SIGSTOP; their session timeout is raised
   so the group keeps them), the events are produced, and they are resumed (SIGCONT) together:
   events/s from the resume to every partition's committed offset at its end (polled every
   20 ms). So neither a rebalance nor the producer (slower than the processors on this host)
   is in the time.
2. Memory: the fold's state (`Fold(emit=True)`, as in the processor) for 10,000 runs, measured
   with tracemalloc (Python allocations, exact and repeatable), with every eviction's deletion
   completed as the processor's Deleter would; per run, per kept checkpoint and per foreign event
   id a run remembers (its last 4,096), and a few runs folded past a full window, for the steady
   state of a long-lived run: with foreign ids (`rep-{i}`) and with the structured ids of
   ckptlog's clients (contract §3 "Deduplication", remembered as ranges).

Restart against history and snapshot interval is bench.processor's restart, driven by bench.report.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import subprocess
import time
import tracemalloc
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from bench.fleet import dedup_bytes
from bench.processor import ckptlog_run, scratch_root, settings_for
from bench.workload import IdKind, events
from ckptlog.events.codec import decode_event
from ckptlog.events.envelope import deletion_completed_event
from ckptlog.events.rejections import Rejection
from ckptlog.kafka.topics import TopicSpec, ensure_topics
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.service.harness import ROLES
from ckptlog.processor.service.settings import load_settings

PARTITIONS = 4
WINDOW_RUNS = 20  # runs folded past a full dedup window (the steady state of a long-lived run)
PAUSED_SESSION_MS = 300_000  # the group keeps a paused (SIGSTOPped) member while the events are produced


# -- partitions -----------------------------------------------------------------------------------


async def partitions(bootstrap: str, tmp: Path, count: int, instances: int, created: list[str]) -> dict[str, Any]:
    """`count` dense events (40 runs, keep=5, 10% validations) over 4 partitions, `instances` processes."""
    names = {role: f"bench-{uuid.uuid4().hex[:6]}-{role}" for role in ROLES}
    connection = load_settings(None, bootstrap_servers=bootstrap).connection(bootstrap)
    await ensure_topics(connection, [TopicSpec(n, PARTITIONS) for n in names.values()], 1)
    created.extend(names.values())
    root = scratch_root(tmp, names)
    settings = settings_for(bootstrap, names, tmp, root=root)
    logs = [tmp / f"scale-{names['input']}-{i}.log" for i in range(instances)]
    procs = [_spawn(ckptlog_run(settings), log) for log in logs]
    try:
        await settled_assignment(logs, PARTITIONS)
        for proc in procs:
            proc.send_signal(signal.SIGSTOP)
        lines = [line.rstrip(b"\n") for line in events(count, 5, 0.1, runs=40, root=root)][:count]
        produce_s, ends = await produce(bootstrap, names["input"], lines)
        start = time.perf_counter()
        for proc in procs:
            proc.send_signal(signal.SIGCONT)
        finish = await committed_at(bootstrap, settings.group_id, names["input"], ends)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
    return {
        "instances": instances,
        "events": count,
        "per_partition": [ends[p] for p in sorted(ends)],
        "rate": sum(ends.values()) / (finish - start),
        "seconds": finish - start,
        "produce_s": produce_s,
    }


def _spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CKPTLOG_SESSION_TIMEOUT_MS": str(PAUSED_SESSION_MS)}
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


def assignments(text: str) -> list[str] | None:
    """The partitions of the last `event=partitions_assigned` line of a processor's log, or None."""
    found = None
    for line in text.splitlines():
        if "event=partitions_assigned" in line:
            value = line.split("partitions=", 1)[1].split()[0] if "partitions=" in line else "-"
            found = [] if value == "-" else value.split(",")
        elif "event=partitions_revoked" in line and found is not None:
            found = None if line.split("partitions=", 1)[-1].split()[0] != "-" else found
    return found


async def settled_assignment(logs: list[Path], total: int, quiet_s: float = 2.0, timeout_s: float = 120.0) -> None:
    """Until every process holds a disjoint share of the `total` partitions, unchanged for `quiet_s`."""
    deadline, since, last = time.monotonic() + timeout_s, None, None
    while time.monotonic() < deadline:
        held = [assignments(log.read_text(errors="replace")) if log.exists() else None for log in logs]
        flat = [p for h in held if h is not None for p in h]
        ok = all(h for h in held) and len(flat) == len(set(flat)) == total
        state = repr(held) if ok else None
        since = since if state is not None and state == last else (time.monotonic() if ok else None)
        last = state
        if since is not None and time.monotonic() - since >= quiet_s:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no settled assignment of {total} partitions in {logs}")


async def produce(bootstrap: str, topic: str, lines: list[bytes]) -> tuple[float, dict[int, int]]:
    """Send every line keyed by its run (the default partitioner spreads runs over partitions);
    returns the seconds it took and each partition's end offset."""
    started = time.perf_counter()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=1 << 20)
    await producer.start()
    try:
        futures = [await producer.send(topic, line, key=json.loads(line)["subject"].encode()) for line in lines]
        sent = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    ends: dict[int, int] = {}
    for meta in sent:
        ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
    return time.perf_counter() - started, ends


async def committed_at(bootstrap: str, group: str, topic: str, ends: dict[int, int], poll_s: float = 0.02) -> float:
    """When every partition of `topic` was committed by `group` at its end (`perf_counter`)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        while True:
            offsets = await admin.list_consumer_group_offsets(group)
            committed = {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}
            if all(committed.get(p, 0) >= end for p, end in ends.items()):
                return time.perf_counter() - poll_s / 2
            await asyncio.sleep(poll_s)
    finally:
        await admin.close()


# -- memory ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class Memory:
    runs: int
    reports_per_run: int
    keep: int | None
    ids: str  # "foreign" or "structured" (bench/workload.py)
    total_bytes: int  # tracemalloc: every Python allocation the fold's state holds
    kept: int  # kept checkpoints, all runs
    foreign_ids: int  # foreign event ids the runs remember
    dedup_bytes: int  # what the runs' dedup state holds (bench/fleet.py dedup_bytes)

    @property
    def per_run(self) -> float:
        return self.total_bytes / self.runs


def fold_memory(runs: int, reports_per_run: int, keep: int | None, ids: IdKind = "foreign") -> Memory:
    """Fold `runs` runs of `reports_per_run` checkpoint reports each, completing every deletion."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fold = Fold()
        _apply_all(fold, events(runs * reports_per_run, keep, 0.0, runs=runs, ids=ids))
        gc.collect()
        total = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    states = fold.runs.values()
    dedup = sum(dedup_bytes(r.seen) for r in states)
    foreign = sum(len(r.seen.foreign) for r in states)
    kept = sum(len(r.checkpoints) for r in states)
    return Memory(runs, reports_per_run, keep, ids, total, kept, foreign, dedup)


def _apply_all(fold: Fold, lines: Iterable[bytes]) -> None:
    for line in lines:
        effects = fold.apply(_decoded(line))
        for deletion in effects.deletions:  # as the Deleter confirms it: the eviction settles
            done = deletion_completed_event(deletion.run_id, [(deletion.path, deletion.eviction)])
            fold.apply(_decoded(json.dumps(done).encode()))


def _decoded(line: bytes) -> Any:
    event = decode_event(line)
    if isinstance(event, Rejection):
        raise RuntimeError(f"rejected: {event.message}")
    return event


def memory(runs: int, reports: int, window_runs: int, window_reports: int) -> dict[str, Any]:
    """The three 10k-run states and the full-window states, with what each costs per unit."""
    base, five, every = (fold_memory(runs, r, k) for r, k in ((0, None), (reports, 5), (reports, None)))
    full, structured = (fold_memory(window_runs, window_reports, 5, ids) for ids in ("foreign", "structured"))
    per_id = (every.dedup_bytes - base.dedup_bytes) / max(every.foreign_ids - base.foreign_ids, 1)
    extra = every.total_bytes - base.total_bytes - (every.dedup_bytes - base.dedup_bytes)
    return {
        "rows": [asdict(m) | {"per_run": m.per_run} for m in (base, five, every, full, structured)],
        "per_run_base": base.per_run,
        "per_kept_checkpoint": extra / max(every.kept - base.kept, 1),
        "per_foreign_id": per_id,
        "per_run_full_window": full.per_run,
        "per_run_full_window_structured": structured.per_run,
        "dedup_per_run_full_window_structured": structured.dedup_bytes / structured.runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--only", default="partitions,memory")
    parser.add_argument("--events", type=int, default=100_000, help="partitions: events produced")
    parser.add_argument("--runs", type=int, default=10_000, help="memory: concurrent runs")
    parser.add_argument("--reports-per-run", type=int, default=20, help="memory: checkpoint reports per run")
    parser.add_argument("--window-reports", type=int, default=5_000, help="memory: reports per run past a full window")
    args = parser.parse_args()
    if "memory" in args.only:
        print(json.dumps(memory(args.runs, args.reports_per_run, WINDOW_RUNS, args.window_reports), indent=1))
    if "partitions" in args.only:
        print(json.dumps(asyncio.run(_partitions_cli(args.bootstrap_servers, args.events)), indent=1))


async def _partitions_cli(bootstrap: str | None, count: int) -> list[dict[str, Any]]:
    import tempfile

    from bench.processor import delete_topics
    from ckptlog.broker import ensure_bootstrap

    servers, created, out = bootstrap or ensure_bootstrap(None), list[str](), list[dict[str, Any]]()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for instances in (1, 2):
                out.append(await partitions(servers, Path(tmp), count, instances, created))
    finally:
        await delete_topics(servers, created)
    return out


if __name__ == "__main__":
    main()

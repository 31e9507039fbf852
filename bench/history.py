"""History, explain and --as-of on a large partition (issue 22, item 5):
`python -m bench.history --events 1000000 --runs 1000`.

One input partition on a real broker holds `--events` records: reports spread round-robin over
`--runs` runs (each started with num_to_keep 5 by score, so nearly every report evicts one) and
the deletion_completed that settles each eviction, keyed by run id as every ckptlog client (and
the processor's deleter) writes them. A snapshot of the whole fold is written
`--interval` events (the processor's default snapshot_every) before the end, as the processor
would have. Then, each timed from a cold call, as `ckptlog history` / `explain` / `inspect
--as-of` run them:

- a raw scan of the partition (aiokafka, nothing decoded): the floor every answer pays;
- `history` of one run (its ~events/runs events, every other run's records skipped undecoded);
- `explain` of one of its evicted checkpoints (the same replay, then the document);
- `--as-of` half an interval before the end (the snapshot, then at most one interval of replay);
- for comparison: a fold of the whole partition (every record decoded and folded), which is what
  answering from a plain replay would cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.processor import delete_topics, preload, scratch_root, settings_for, topics
from ckptlog.broker import ensure_bootstrap
from ckptlog.events.codec import decode_event
from ckptlog.events.decoded import DecodedEvent
from ckptlog.events.envelope import deletion_completed_event, encode_json
from ckptlog.events.rejections import Rejection
from ckptlog.kafka.reader import TopicReader
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.snapshot import encode, of_fold
from ckptlog.processor.explain.checkpoint import explain
from ckptlog.processor.explain.source import history_of, views_as_of
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.storage.snapshots import SnapshotStore


def _line(kind: str, run: str, event_id: str, data: dict[str, Any]) -> bytes:
    body = {"specversion": "1.0", "id": event_id, "source": "bench", "type": f"ckptlog.{kind}", "subject": run}
    return json.dumps({**body, "time": "2026-12-02T12:00:00Z", "data": data}, separators=(",", ":")).encode()


def workload(events: int, runs: int, settings: FoldSettings, root: str) -> list[bytes]:
    """`events` records: each run's run_started, then reports round-robin, each eviction followed by
    the deletion_completed that settles it, as the processor's deleter writes it (found by folding
    as the log is written, so the settled evictions are exactly the fold's)."""
    lines = [
        _line(
            "run_started.v1",
            f"run-{r}",
            f"s{r}",
            {
                "storage_path": f"{root}/run-{r}",
                "checkpoint_config": {"num_to_keep": 5, "checkpoint_score_attribute": "acc"},
            },
        )
        for r in range(runs)
    ]
    fold = Fold(settings, emit=False)
    for line in lines:
        fold.apply(_decoded(line))
    i = 0
    while len(lines) < events:
        run = f"run-{i % runs}"
        data = {"metrics": {"acc": (i * 7919) % 1000 / 1000, "step": i}, "checkpoint": {"path": f"{root}/{run}/c{i}"}}
        lines.append(_line("report.v1", run, f"e{i}", data))
        for deletion in fold.apply(_decoded(lines[-1])).deletions:
            lines.append(encode_json(deletion_completed_event(run, [(deletion.path, deletion.eviction)])))
        i += 1
    return lines[:events]


def _decoded(line: bytes) -> DecodedEvent:
    event = decode_event(line)
    assert not isinstance(event, Rejection), event
    return event


async def raw_scan(conn: Any, topic: str) -> tuple[float, int]:
    started, count = time.perf_counter(), 0
    async with TopicReader(conn, topic, [0]) as reader:
        async for batch in reader.raw_batches():
            count += len(batch)
    return time.perf_counter() - started, count


async def measure(args: argparse.Namespace, bootstrap: str, tmp: Path, created: list[str]) -> None:
    names = await topics(bootstrap, uuid.uuid4().hex[:6], created)
    root = scratch_root(tmp, names)
    settings = settings_for(bootstrap, names, tmp, root=root)
    conn = settings.connection(bootstrap)
    lines = workload(args.events, args.runs, settings.fold_settings(), root)
    started = time.perf_counter()
    end = await preload(bootstrap, names["input"], lines)
    print(
        f"wrote {end:,} input records ({sum(map(len, lines)) / len(lines):.0f} B each) in "
        f"{time.perf_counter() - started:.1f} s; {args.runs:,} runs, ~{args.events // args.runs:,} records each"
    )

    started = time.perf_counter()
    whole = fold_lines([line + b"\n" for line in lines], settings.fold_settings())
    fold_s = time.perf_counter() - started
    cut = end - args.interval
    prefix = fold_lines([line + b"\n" for line in lines[:cut]], settings.fold_settings())
    fold = prefix.fold
    store = SnapshotStore(settings.snapshots, names["input"], 0)
    encoded = encode(of_fold(fold, names["input"], 0, cut))
    snapshot_bytes = len(encoded)
    store.write(encoded, cut)
    pid = PartitionId(names["input"], 0)

    scan_s, scanned = await raw_scan(conn, names["input"])
    run_id = "run-1"
    t = time.perf_counter()
    replayed = await history_of(conn, settings, run_id)
    history_s = time.perf_counter() - t
    steps = replayed.replay.steps[run_id]
    evicted = next(e["path"] for s in steps for e in s.effects if e["kind"] == "evicted")
    t = time.perf_counter()
    replay = (await history_of(conn, settings, run_id)).replay
    doc = explain(run_id, evicted, replay.steps[run_id], replay.state(run_id))
    explain_s = time.perf_counter() - t
    assert doc["state"] == "deleted", doc
    as_of = end - args.interval // 2
    t = time.perf_counter()
    found = await views_as_of(conn, settings, [run_id], as_of)
    as_of_s = time.perf_counter() - t
    t = time.perf_counter()
    await views_as_of(conn, settings, [run_id], cut - 2)  # before the only snapshot: from the log start
    as_of_start_s = time.perf_counter() - t
    view = whole.fold.runs[run_id]
    assert len(found.views[run_id]["checkpoints"]) <= len(view.checkpoints) + 1
    print(
        f"{pid}, {end:,} records; run {run_id!r}: {len(steps):,} events in its history; snapshot "
        f"{snapshot_bytes / 1e6:.1f} MB"
    )
    rows = [
        ("raw scan of the partition (aiokafka, nothing decoded)", scan_s, f"{scanned:,} records"),
        ("ckptlog history RUN", history_s, f"split exact: {replayed.split and replayed.replay.exact()}"),
        ("ckptlog explain RUN PATH (an evicted checkpoint)", explain_s, doc["state"]),
        (f"inspect RUN --as-of {as_of} (snapshot at {cut} + {as_of - cut + 1:,} records)", as_of_s, ""),
        (f"inspect RUN --as-of {cut - 2} (before the only snapshot: from the log start)", as_of_start_s, ""),
        ("for comparison: fold of the whole partition (decode + fold every record)", fold_s, "in memory, no Kafka"),
    ]
    print(f"| {'what':<78} | {'seconds':>8} | note")
    for what, seconds, note in rows:
        print(f"| {what:<78} | {seconds:8.2f} | {note}")


async def main(args: argparse.Namespace) -> None:
    bootstrap = ensure_bootstrap(args.bootstrap)
    created: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            await measure(args, bootstrap, Path(tmp), created)
    finally:
        await delete_topics(bootstrap, created)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--interval", type=int, default=10_000, help="the processor's snapshot_every")
    parser.add_argument("--bootstrap", default=None)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))

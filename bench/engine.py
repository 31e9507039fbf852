"""The processor engine without a broker, for instruction counts: `python -m bench.engine [N] [flags]`.

A `PartitionTask` folds N preloaded events (`--workload`, bench.processor's: dense by default,
every report evicts one checkpoint; sparse, every 10th report saves one) in batches of `--batch`
records, publishing through the real `Batcher` into aiokafka's compiled batch builders (the bytes
are built, nothing is sent), deleting through the real `Deleter` (the paths do not exist: unlink
says so; the runs' roots and their claims are made in a fresh temporary directory, `--root` names
another) and folding the deletion_completed events back in, as they would come back from the
input partition. Seconds here are noisy; count
instructions instead, which repeat exactly:

    valgrind --tool=callgrind --callgrind-out-file=/tmp/e.out python -m bench.engine 20000
    valgrind --tool=callgrind --callgrind-out-file=/tmp/g.out python -m bench.engine 20000 --setup-only

(total - setup-only) / N is the engine's cost per event, every thread's (the Deleter's walks included).
It prints `main_cpu_s` (the event loop thread's CPU until every input batch committed) and
`process_cpu_s` (every thread's, until the last completion is folded back: the walks too).
Flags take parts away to attribute it: `--stub-deleter`, `--no-foldback` (completions dropped),
`--no-publish`, `--core-only` (decode + fold only).
`--metrics` records the processor's Prometheus metrics (as `ckptlog run` does) instead of none.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

from bench.processor import WORKLOADS, NullClaims, NullDeleter
from ckptlog.events.codec import decode_event
from ckptlog.kafka.producers import Batcher
from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.service.metrics import NO_METRICS, PrometheusMetrics
from ckptlog.processor.service.partition import PartitionTask, TaskParts, new_task
from ckptlog.processor.service.processor import tune_gc
from ckptlog.processor.service.records import RecordFactory, TopicNames
from ckptlog.processor.service.restore import Restored
from ckptlog.processor.service.settings import ServiceSettings, load_settings
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.claim_writer import ClaimWriter
from ckptlog.processor.storage.deletion import Deleter
from ckptlog.processor.storage.snapshots import SnapshotStore

PID = PartitionId("bench-in", 0)
NAMES = TopicNames("bench-in", "bench-c", "bench-v", "bench-w", "bench-s", "bench-d")


class BuildingProducer:
    """`create_batch` of a real, never started producer; `send_batch` builds the batch (CRC and all)."""

    def __init__(self) -> None:
        self._real = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", max_batch_size=512 * 1024)
        self.batches = self.bytes = 0

    def create_batch(self) -> Any:
        return self._real.create_batch()

    async def send_batch(self, builder: Any, topic: str, *, partition: int) -> asyncio.Future[None]:
        self.bytes += len(builder._build())
        self.batches += 1
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    def close(self) -> None:
        self._real._closed = True  # never started: nothing to stop (silences "Unclosed AIOKafkaProducer")


class Publisher:
    def __init__(self, producer: BuildingProducer, send: bool) -> None:
        self._batcher, self._send, self.records = Batcher(producer), send, 0

    async def start(self) -> None:
        return None

    async def commit(self, records: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None:
        self.records += len(records)
        if self._send:
            await self._batcher.send_all(records)

    async def close(self) -> None:
        return None


def consumer_records(values: Sequence[tuple[bytes | None, bytes | None]], start: int) -> list[Any]:
    return [
        ConsumerRecord(
            PID.topic, PID.partition, start + i, 0, 0, key, value, None, len(key or b""), len(value or b""), ()
        )
        for i, (key, value) in enumerate(values)
    ]


def core_only(settings: ServiceSettings, inputs: list[tuple[bytes, bytes]]) -> None:
    fold = Fold(settings.fold_settings())
    for key, value in inputs:
        fold.apply(
            decode_event(
                value,
                key,
                max_bytes=settings.max_payload_bytes,  # type: ignore[arg-type]
                max_depth=settings.max_depth,
            )
        )


async def engine(args: argparse.Namespace, inputs: list[tuple[bytes, bytes]]) -> None:
    settings = load_settings(None, storage_root=args.root)
    producer = BuildingProducer()  # created (not started) in every mode: same fixed cost
    try:
        if args.core_only:
            core_only(settings, inputs)
        elif not args.setup_only:
            await run_task(args, inputs, settings, producer)
    finally:
        producer.close()


async def run_task(
    args: argparse.Namespace, inputs: list[tuple[bytes, bytes]], settings: ServiceSettings, producer: BuildingProducer
) -> None:
    fold = Fold(settings.fold_settings())
    publisher = Publisher(producer, send=not args.no_publish)
    completions: list[OutRecord] = []
    tasks: list[PartitionTask] = []

    def on_done(keys: Sequence[tuple[str, str]]) -> None:
        if not args.no_foldback:
            completions.extend(tasks[0].deletions_settled(keys))

    claims: Any = NullClaims() if args.stub_deleter else ClaimWriter(outer_root=args.root)
    deleter: Any = (
        NullDeleter()
        if args.stub_deleter
        else Deleter(outer_root=args.root, on_done=on_done, concurrency=args.concurrency, claims=claims)
    )
    store = SnapshotStore(tempfile.mkdtemp(), PID.topic, PID.partition)
    metrics = PrometheusMetrics() if args.metrics else NO_METRICS
    snapshots = SnapshotScheduler(PID, store, 10**9, 10**9, None, metrics=metrics)
    parts = TaskParts(publisher, RecordFactory(NAMES, PID), snapshots, deleter, claims, metrics=metrics)
    task = new_task(PID, Restored(fold, 0, 0, None), parts)
    tasks.append(task)
    task.catch_up()
    started, offset, pending, committed = time.perf_counter(), 0, list(inputs), 0.0
    main_cpu, process_cpu = time.thread_time(), time.process_time()
    while pending or completions:
        chunk: list[tuple[bytes | None, bytes | None]] = list(pending[: args.batch])
        del pending[: args.batch]
        chunk += [(r.key, r.value) for r in completions]  # written back to the input partition
        completions.clear()
        await task.process(consumer_records(chunk, offset))
        offset += len(chunk)
        await task.wait_committed()
        if not pending:
            if not committed:  # every input batch committed; main_cpu: this thread's CPU (the rest waited)
                committed, main_cpu = time.perf_counter() - started, time.thread_time() - main_cpu
            await deleter.drain()
            await asyncio.sleep(0)
    process_cpu = time.process_time() - process_cpu  # every thread's, to the last completion folded
    await deleter.close()
    await claims.close()
    print(
        f"events={len(inputs)} offsets={offset} published={publisher.records} batches={producer.batches} "
        f"bytes={producer.bytes} committed_s={committed:.3f} main_cpu_s={main_cpu:.3f} "
        f"process_cpu_s={process_cpu:.3f} seconds={time.perf_counter() - started:.2f}",
        file=sys.stderr,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("events", type=int, nargs="?", default=20_000)
    parser.add_argument("--batch", type=int, default=5000, help="records per batch (one transaction)")
    parser.add_argument("--concurrency", type=int, default=8, help="Deleter jobs at a time")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="dense", help="bench.processor's workloads")
    parser.add_argument(
        "--root",
        help="the runs' storage root (default: a fresh temporary directory; a root another process claimed "
        "runs in refuses every deletion, each logged)",
    )
    for flag in ("setup-only", "core-only", "stub-deleter", "no-foldback", "no-publish", "metrics"):
        parser.add_argument(f"--{flag}", action="store_true")
    args = parser.parse_args()
    made = None if args.root else tempfile.mkdtemp(prefix="bench-engine-")
    args.root = args.root or Path(made or "", "runs").as_uri()
    tune_gc()
    events = WORKLOADS[args.workload][1](args.events, root=args.root)
    inputs = [(json.loads(line)["subject"].encode(), line) for line in events]
    try:
        asyncio.run(engine(args, inputs))
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main()

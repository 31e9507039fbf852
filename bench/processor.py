"""Benchmark of the stream processor: `python -m bench.processor [--events N] [--history 100000,1000000]`.

1. Throughput: N events preloaded on one partition (two workloads: bench.workload, where every
   report saves a checkpoint and evicts one, and one where every 10th report does), then (a) a
   bare aiokafka consume -> produce loop (one copy per record, offsets committed per batch) and
   (b) the processor (exactly_once and at_least_once), in this process, on the same broker and
   data. Also (c) the processor with storage deletions stubbed out, to
   separate the engine from the Deleter (every report of this workload evicts one checkpoint).
2. Latency: the processor as a subprocess (exactly_once); reports are produced at 1,000/s and a
   read_committed reader of the watermarks topic measures report send -> committed watermark (the
   first watermark naming its offset or a later one of the partition: one per run per transaction).
3. Restart: H events of history (checkpoint every 10th report) processed by a `ckptlog run`
   subprocess (snapshot every 10k) until it is idle, which is then killed with SIGKILL; the time
   for a new processor to restore and catch up is
   measured in-process and as a whole process (spawn -> caught_up log line), per history size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from bench.workload import ROOT, events
from ckptlog.broker import ensure_bootstrap
from ckptlog.kafka.topics import TopicSpec, ensure_topics
from ckptlog.processor.service.harness import ROLES, run_argv
from ckptlog.processor.service.logs import configure_logging
from ckptlog.processor.service.processor import ClaimsFactory, DeleterFactory, Processor, tune_gc
from ckptlog.processor.service.settings import ServiceSettings, load_settings
from ckptlog.processor.storage.deletion import Deleter


def sparse_events(
    reports: int, every: int = 10, runs: int = 10, keep: int = 5, seed: int = 7, root: str = ROOT
) -> list[bytes]:
    """Like bench.workload but only every `every`-th report of a run carries a checkpoint (metrics
    are reported every step, checkpoints saved every N steps, as training loops do)."""
    import random

    rng = random.Random(seed)
    out = [
        json.dumps(
            {
                "specversion": "1.0",
                "id": f"start-{r}",
                "source": "bench",
                "type": "ckptlog.run_started.v1",
                "subject": f"run-{r}",
                "data": {
                    "storage_path": f"{root}/run-{r}",
                    "checkpoint_config": {"num_to_keep": keep, "checkpoint_score_attribute": "val/acc"},
                },
            },
            separators=(",", ":"),
        ).encode()
        for r in range(runs)
    ]
    for i in range(reports - runs):
        run_id, step = f"run-{i % runs}", i // runs
        data: dict[str, Any] = {"metrics": {"val": {"acc": round(rng.random(), 6)}, "loss": rng.random(), "step": step}}
        if step % every == every - 1:
            data["checkpoint"] = {"path": f"{root}/{run_id}/ckpt-{step:08d}"}
        out.append(
            json.dumps(
                {
                    "specversion": "1.0",
                    "id": f"rep-{i}",
                    "source": "bench",
                    "type": "ckptlog.report.v1",
                    "subject": run_id,
                    "data": data,
                },
                separators=(",", ":"),
            ).encode()
        )
    return out


def dense_events(reports: int, root: str = ROOT) -> list[bytes]:
    """bench.workload: every report saves a checkpoint (keep=5, 10% validations)."""
    return [line.rstrip(b"\n") for line in events(reports, 5, 0.1, runs=10, root=root)][:reports]


def materialize(lines: list[bytes], root: Path, checkpoints: bool = True) -> int:
    """Every checkpoint the log reports, as a directory holding one small file under `root` (made
    afresh), so that the processor's deletions are real ones; how many were made. Without
    `checkpoints`, only the runs' roots (empty): each deletion finds its checkpoint gone."""
    shutil.rmtree(root, ignore_errors=True)
    made = 0
    for line in lines:
        checkpoint = json.loads(line)["data"].get("checkpoint")
        if checkpoint:
            directory = Path(checkpoint["path"].removeprefix("file://"))
            if not checkpoints:
                directory.parent.mkdir(parents=True, exist_ok=True)
                continue
            directory.mkdir(parents=True)
            (directory / "model.bin").write_bytes(b"\0" * 256)
            made += 1
    return made


def on_disk(root: Path) -> int:
    """Checkpoint directories left under `root` (runs/<run>/<checkpoint>)."""
    return sum(1 for _ in root.glob("*/*"))


WORKLOADS: dict[str, tuple[str, Callable[..., list[bytes]]]] = {
    "dense": ("every report saves a checkpoint (keep=5: each evicts one -> a deletion)", dense_events),
    "sparse": ("every 10th report saves a checkpoint (keep=5)", sparse_events),
}


class NullDeleter:
    """Accepts every deletion and does nothing (engine-only throughput)."""

    def __init__(self, **_: Any) -> None:
        return None

    def submit(self, run_id: str, path: str, root: str) -> bool:
        return True

    def submit_many(self, requests: Any, source: str | None = None) -> int:
        return len(requests)

    def retry_failed(self) -> int:
        return 0

    async def drain(self, timeout: float | None = None) -> bool:
        return True

    async def close(self) -> None:
        return None


class NullClaims:
    """Accepts every claim and writes none (with NullDeleter: the engine without storage)."""

    held: frozenset[str] = frozenset()

    def __init__(self, **_: Any) -> None:
        return None

    def claim_many(
        self,
        claims: Any,
        source: str | None = None,
        *,
        retired: bool = False,
        reopened: bool = False,
        at: int | None = None,
    ) -> int:
        return 0

    def holds(self, url: str) -> bool:
        return False

    async def close(self) -> None:
        return None


_STUB: DeleterFactory = NullDeleter  # mypy holds the stubs to the processor's ports (ports.DeletionService,
_STUB_CLAIMS: ClaimsFactory = NullClaims  # ports.ClaimService)


async def topics(bootstrap: str, tag: str, created: list[str]) -> dict[str, str]:
    names = {role: f"bench-{tag}-{role}" for role in ROLES}
    settings = load_settings(None, bootstrap_servers=bootstrap)
    await ensure_topics(settings.connection(bootstrap), [TopicSpec(n, 1) for n in names.values()], 1)
    created.extend(names.values())
    return names


def scratch_root(tmp: Path, names: dict[str, str]) -> str:
    """A section's `--storage-root`, its runs' roots below it: in the section's temporary directory,
    one per input topic, so the run-root claims the processor writes there (contract §9) go with it.
    A fixed root shared by every invocation (`file:///bench`) kept the claims of earlier ones, so a
    run id used again was another run's root and every eviction was refused, and logged."""
    return (tmp / "runs" / names["input"]).as_uri()


def settings_for(bootstrap: str, names: dict[str, str], tmp: Path, *, root: str, **extra: Any) -> ServiceSettings:
    group = f"g-{names['input']}-{uuid.uuid4().hex[:6]}"
    return load_settings(
        None,
        bootstrap_servers=bootstrap,
        group_id=group,
        snapshots=str(tmp / "snapshots" / group),
        storage_root=root,
        **{f"{role}_topic": name for role, name in names.items()},
        **extra,
    )


async def preload(bootstrap: str, topic: str, lines: list[bytes]) -> int:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=1 << 20)
    await producer.start()
    try:
        futures = [await producer.send(topic, line, key=json.loads(line)["subject"].encode()) for line in lines]
        return int((await futures[-1]).offset) + 1
    finally:
        await producer.stop()


async def bare_loop(bootstrap: str, source: str, sinks: list[str], count: int) -> tuple[float, float]:
    """Consume `count` records and produce one copy of each to every sink, committing per batch:
    (events/s, this process's CPU µs per event, all threads) from the first batch on."""
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=f"bare-{uuid.uuid4().hex[:6]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=4 << 20,
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, max_batch_size=512 << 10)
    await consumer.start()
    await producer.start()
    done, started, cpu = 0, None, 0.0
    try:
        while done < count:
            batches = await consumer.getmany(timeout_ms=100, max_records=5000)
            if started is None and batches:
                started, cpu = time.perf_counter(), time.process_time()
            for tp, records in batches.items():
                await asyncio.gather(
                    *[await producer.send(sink, r.value, key=r.key) for r in records for sink in sinks]
                )
                await consumer.commit({tp: records[-1].offset + 1})
                done += len(records)
    finally:
        await consumer.stop()
        await producer.stop()
    assert started is not None
    return count / (time.perf_counter() - started), (time.process_time() - cpu) / count * 1e6


@dataclass
class Measured:
    rate: float  # events/s, first committed batch -> caught up (the input's end durable)
    fanout: float  # records published per input record
    deletions_s: float  # after caught up, until every accepted deletion was carried out
    cpu_us: float  # this process's CPU time per timed event (all threads: the deleter's too), less noisy than `rate`


async def processor_rate(settings: ServiceSettings, end: int, count: int, **kwargs: Any) -> Measured:
    """Events/s from the first committed batch to the last: the events of that first batch are
    not counted, as the time to process them is not timed (the progress is only visible once a
    batch is committed). Then how long the deleter still needed for the evictions."""
    processor = Processor(settings, **kwargs)
    task = asyncio.create_task(processor.run())
    await processor.ready.wait()
    started, first, cpu = None, 0, 0.0
    while not task.done():
        durable = max((t.pipeline.next_offset for t in processor.tasks.values()), default=0)
        if started is None and durable > 0:
            started, first = time.perf_counter() - 0.005, durable  # progress is sampled every 5 ms
            cpu = time.process_time()
        if durable >= end:
            break
        await asyncio.sleep(0.005)
    caught_up, cpu = time.perf_counter(), time.process_time() - cpu
    elapsed = caught_up - (started or 0)
    timed = processor.stats()  # the timed part's batches; those after it fold the deletions' completions
    while any(t.pipeline.in_flight for t in processor.tasks.values()):  # step 4 hands the last evictions over
        await asyncio.sleep(0.005)
    deleter = processor._deleter
    while isinstance(deleter, Deleter) and deleter.backlog > deleter.failing:  # counts: no copy of the keys
        await asyncio.sleep(0.005)
    deletions_s = time.perf_counter() - caught_up
    count = min(count, end - first)
    stats = processor.stats()
    processor.stop()
    await task
    if os.environ.get("BENCH_DEBUG"):
        print(
            f"    wall={elapsed:.2f}s fold={timed.fold_s:.2f}s commit={timed.commit_s:.2f}s batches={timed.batches} "
            f"(until caught up); then {stats.batches - timed.batches} batches of {stats.consumed - timed.consumed:,} "
            f"records (the deletions' completions) in {deletions_s:.2f}s"
        )
    return Measured(count / elapsed, stats.published / max(stats.consumed, 1), deletions_s, cpu / count * 1e6)


VARIANTS: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("exactly_once", {}, {}, True),
    ("at_least_once", {"guarantee": "at_least_once"}, {}, True),
    ("exactly_once, deletions stubbed", {}, {"deleter_factory": NullDeleter, "claims_factory": NullClaims}, True),
    # issue 25's own measurement: the deleter does its per-path work, the checkpoints are not on disk
    ("exactly_once, checkpoints not on disk", {}, {}, False),
    ("at_least_once, checkpoints not on disk", {"guarantee": "at_least_once"}, {}, False),
]
"""(label, settings, Processor kwargs, whether the checkpoints exist on disk)."""


async def throughput(
    bootstrap: str, tmp: Path, count: int, created: list[str], workloads: list[str]
) -> list[dict[str, Any]]:
    """Prints each workload's rates; returns them too (events/s by label), for bench.report.

    Each workload's checkpoints exist on local disk (made afresh before each processor run), so
    that the processor's deletions are real; the stubbed variant separates the engine from them."""
    results: list[dict[str, Any]] = []
    tree = tmp / "runs"
    for workload, (title, make) in ((w, WORKLOADS[w]) for w in workloads):
        names = await topics(bootstrap, uuid.uuid4().hex[:6], created)
        lines = make(count, root=tree.as_uri())
        end = await preload(bootstrap, names["input"], lines)
        bare, bare_cpu = await bare_loop(bootstrap, names["input"], [names["dlq"]], count)
        print(f"throughput, {count:,} events, 10 runs, 1 partition; {title}:")
        print(
            f"  bare aiokafka consume->produce loop               {bare:>9,.0f} events/s  {bare_cpu:.1f} µs CPU/event"
        )
        cpu_us = {"bare": bare_cpu}  # this process's CPU per timed event, by row label: steadier than rates
        row: dict[str, Any] = {"workload": workload, "events": count, "bare": bare, "cpu_us": cpu_us}
        results.append(row)
        fanout = 1.0
        for n, (label, extra, kwargs, files) in enumerate(VARIANTS):
            if n:  # a log of its own: the last run's deletion completions (appended to its input) would
                # settle this run's evictions before the deleter gets to them
                names = await topics(bootstrap, uuid.uuid4().hex[:6], created)
                end = await preload(bootstrap, names["input"], lines)
            made = materialize(lines, tree, checkpoints=files)
            settings = settings_for(bootstrap, names, tmp, root=tree.as_uri(), **extra)
            measured = await processor_rate(settings, end, count, **kwargs)
            fanout = max(fanout, measured.fanout)
            row[label], cpu_us[label] = measured.rate, measured.cpu_us
            left = "" if "deleter_factory" in kwargs or not files else f"; {made - on_disk(tree):,} of {made:,} deleted"
            print(
                f"  processor {label:<40}{measured.rate:>9,.0f} events/s  ({measured.rate / bare:.0%} of bare), "
                f"{measured.cpu_us:.1f} µs CPU/event{left}, the last {measured.deletions_s:.2f}s after caught up",
                flush=True,
            )
        copies = round(fanout)
        row["fanout"] = fanout
        if copies > 1:  # the same output volume from the bare loop: what writing it costs on this host
            roles = ("checkpoints", "watermarks", "state", "validations", "dlq")
            sinks = [names[roles[i % 5]] for i in range(copies)]
            same, same_cpu = await bare_loop(bootstrap, names["input"], sinks, count)
            print(
                f"  bare loop writing {copies} copies per record (the processor wrote {fanout:.1f} records per "
                f"input)  {same:>9,.0f} events/s  ({same / bare:.0%} of bare), {same_cpu:.1f} µs CPU/event",
                flush=True,
            )
            row[f"bare, {copies} copies"], cpu_us[f"bare, {copies} copies"] = same, same_cpu
    shutil.rmtree(tree, ignore_errors=True)
    return results


def ckptlog_run(settings: ServiceSettings) -> list[str]:
    """`ckptlog run` for a benchmark: its snapshot interval, INFO logs (the caught_up line is timed)."""
    return run_argv(settings, snapshot_every=settings.snapshot_every, log_level="INFO")


async def wait_for_line(log: Path, needle: bytes, count: int = 1, timeout_s: float = 600.0) -> float:
    deadline = time.monotonic() + timeout_s
    while log.read_bytes().count(needle) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{needle!r} not seen in {log}")
        await asyncio.sleep(0.005)
    return time.perf_counter()


async def main(args: argparse.Namespace) -> None:
    from bench.latency import latency  # the sections in modules of their own, which import this one
    from bench.restart import restart

    tune_gc()  # as `ckptlog run` does
    configure_logging("text", "CRITICAL")  # the workload's checkpoint paths do not exist: no missing-flag noise
    bootstrap = args.bootstrap_servers or ensure_bootstrap(None)
    created: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if "throughput" in args.only:
                await throughput(bootstrap, Path(tmp), args.events, created, args.workloads.split(","))
            if "latency" in args.only:
                await latency(bootstrap, Path(tmp), args.rate, args.seconds, created)
            if "restart" in args.only:
                for history in args.history:
                    await restart(bootstrap, Path(tmp), history, created)
    finally:
        await delete_topics(bootstrap, created)


async def delete_topics(bootstrap: str, names: list[str]) -> None:
    """The benchmark's topics, once it is done with them."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics(names)
    finally:
        await admin.close()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--events", type=int, default=100_000, help="throughput: events preloaded")
    parser.add_argument("--rate", type=int, default=1000, help="latency: reports per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="latency: how long to send")
    parser.add_argument("--history", type=lambda s: [int(x) for x in s.split(",")], default=[100_000, 1_000_000])
    parser.add_argument("--workloads", default="dense,sparse", help="throughput: dense and/or sparse")
    parser.add_argument("--only", default="throughput,latency,restart", help="comma-separated sections")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))

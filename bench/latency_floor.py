"""The latency floor of an exactly-once consume-transform-produce loop on this host and broker:
`python -m bench.latency_floor [--rate 1000] [--seconds 30]`.

The same measurement as bench.processor's latency section (reports at `--rate`, a read_committed
reader timing report -> committed record), but the processor is a bare loop in a process of its own:
per fetched batch one transaction through ckptlog's own transactional producer, with one small
record per input record (its id naming the input offset, as ckptlog's watermarks do) and the
consumer's offsets.
No fold, no snapshots, no deletions: what is left is the client, the transaction's round trips and
the broker sharing the host: no processor built on this client and broker goes below it. Compare with
`python -m bench.processor --only latency` and `bench.incremental_broker --only latency` run beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from bench.latency import percentiles, timed_reports
from bench.processor import delete_topics, scratch_root, topics
from ckptlog.broker import ensure_bootstrap
from ckptlog.kafka.producers import TransactionalProducer
from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.service.settings import load_settings


async def loop(bootstrap: str, source: str, sink: str, group: str) -> None:
    """Until SIGTERM: fetch, then one transaction per batch through ckptlog's own transactional adapter
    (ckptlog/kafka/producers.py `TransactionalProducer`: a record per input, the offsets), committed."""
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        fetch_max_wait_ms=100,
    )
    conn = load_settings(None, bootstrap_servers=bootstrap).connection(bootstrap)
    producer = TransactionalProducer(conn, group, PartitionId(source, 0), group)
    await consumer.start()
    await producer.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=100, max_records=20_000)
            if not batches:
                continue
            records = [
                OutRecord(sink, r.key, json.dumps({"id": f"floor:{tp.topic}:{tp.partition}:{r.offset}"}).encode())
                for tp, got in batches.items()
                for r in got
            ]
            offsets = {PartitionId(tp.topic, tp.partition): got[-1].offset + 1 for tp, got in batches.items()}
            await producer.commit(records, offsets)
    finally:
        await consumer.stop()
        await producer.stop()


async def measure(args: argparse.Namespace) -> None:
    bootstrap = args.bootstrap_servers or ensure_bootstrap(None)
    created: list[str] = []
    try:
        names = await topics(bootstrap, uuid.uuid4().hex[:6], created)
        argv = [sys.executable, "-m", "bench.latency_floor", "--loop", names["input"], names["watermarks"]]
        proc = subprocess.Popen([*argv, "--bootstrap-servers", bootstrap], stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready", "the loop did not start"
            with tempfile.TemporaryDirectory() as tmp:
                root = scratch_root(Path(tmp), names)
                sent, latencies = await timed_reports(bootstrap, names, args.rate, args.seconds, root)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        p50, p99, most = percentiles(latencies)
        print(
            f"latency floor (bare loop, ckptlog's transactional producer), {args.rate:,} reports/s "
            f"for {args.seconds:.0f} s "
            f"({len(latencies):,} answered of {len(sent):,}): report -> committed record p50 {p50 * 1000:.0f} ms, "
            f"p99 {p99 * 1000:.0f} ms, max {most * 1000:.0f} ms",
            flush=True,
        )
    finally:
        await delete_topics(bootstrap, created)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--loop", nargs=2, metavar=("SOURCE", "SINK"), help="run the loop (the measured process)")
    args = parser.parse_args()
    if args.loop:
        source, sink = args.loop
        asyncio.run(loop(args.bootstrap_servers, source, sink, f"floor-{uuid.uuid4().hex[:6]}"))
    else:
        asyncio.run(measure(args))


if __name__ == "__main__":
    main()

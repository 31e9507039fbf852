"""Latency of report -> committed watermark, for `python -m bench.processor --only latency` and the
benches that time the same path (bench.incremental_broker, bench.latency_floor): reports produced at a
rate, and a read_committed reader of the watermarks topic timing each report to the first watermark
naming its offset or a later one of the partition (one per run per transaction, contract §4)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.processor import ckptlog_run, dense_events, scratch_root, settings_for, topics, wait_for_line


async def latency(bootstrap: str, tmp: Path, rate: int, seconds: float, created: list[str]) -> dict[str, float]:
    """Prints the percentiles; returns them too (seconds), for bench.report."""
    names = await topics(bootstrap, uuid.uuid4().hex[:6], created)
    root = scratch_root(tmp, names)
    settings = settings_for(bootstrap, names, tmp, root=root)
    log = tmp / f"latency-{names['input']}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(ckptlog_run(settings), stdout=out, stderr=out)
    try:
        await wait_for_line(log, b"event=caught_up", timeout_s=60)
        sent, latencies = await timed_reports(bootstrap, names, rate, seconds, root)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    p50, p99, most = percentiles(latencies)
    print(
        f"latency, exactly_once, {rate:,} reports/s for {seconds:.0f}s ({len(latencies):,} answered of "
        f"{len(sent):,} reports): report -> committed watermark p50 {p50 * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {most * 1000:.0f} ms",
        flush=True,
    )
    return {"rate": rate, "p50": p50, "p99": p99, "max": most, "seen": len(latencies), "sent": len(sent)}


async def timed_reports(
    bootstrap: str, names: dict[str, str], rate: int, seconds: float, root: str
) -> tuple[dict[int, float], list[float]]:
    """Reports sent at `rate` for `seconds` (their offsets and send times) and, in arrival order, the
    latencies to the committed watermark (or record) answering each, read for 2 s more."""
    sent: dict[int, float] = {}
    latencies: list[float] = []
    reader = asyncio.create_task(_watermarks(bootstrap, names["watermarks"], sent, latencies))
    await _send_at_rate(bootstrap, names["input"], rate, seconds, sent, root)
    await asyncio.sleep(2)
    reader.cancel()
    return sent, latencies


def percentiles(latencies: list[float]) -> tuple[float, float, float]:
    """p50, p99 and max of the latencies in arrival order, the first 10% dropped (warm-up)."""
    measured = sorted(latencies[len(latencies) // 10 :])
    return measured[len(measured) // 2], measured[int(len(measured) * 0.99)], measured[-1]


async def _send_at_rate(
    bootstrap: str, topic: str, rate: int, seconds: float, sent: dict[int, float], root: str
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await producer.start()
    lines = dense_events(int(rate * seconds), root)
    tick, per_tick, start = 0.01, max(1, rate // 100), time.perf_counter()
    try:
        for i in range(0, len(lines), per_tick):
            await asyncio.sleep(max(0.0, start + (i // per_tick) * tick - time.perf_counter()))
            now = time.perf_counter()
            futures = [
                await producer.send(topic, line, key=json.loads(line)["subject"].encode())
                for line in lines[i : i + per_tick]
            ]
            for meta in await asyncio.gather(*futures):
                sent[meta.offset] = now
    finally:
        await producer.stop()


async def _watermarks(bootstrap: str, topic: str, sent: dict[int, float], latencies: list[float]) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest", fetch_max_wait_ms=5
    )
    await consumer.start()
    consumer.assign([TopicPartition(topic, 0)])
    answered = -1  # every report at or below it has been answered
    try:
        while True:
            for records in (await consumer.getmany(timeout_ms=50)).values():
                now = time.perf_counter()
                for record in records:
                    # one watermark per run per transaction (contract §4), named by the last input record of
                    # its batch that changed the run: it answers every report of the partition up to there
                    offset = int(json.loads(record.value)["id"].split(":")[3])
                    latencies += [now - sent[o] for o in range(answered + 1, offset + 1) if o in sent]
                    answered = max(answered, offset)
    finally:
        await consumer.stop()

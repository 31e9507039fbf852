"""Restart to caught-up, for `python -m bench.processor --only restart`: H events of history processed
by a `ckptlog run` subprocess until idle, SIGKILL, then a new processor restores and replays, timed
in-process and as a whole new process (spawn -> caught_up log line)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.processor import ckptlog_run, preload, scratch_root, settings_for, sparse_events, topics, wait_for_line
from ckptlog.processor.service.logs import configure_logging
from ckptlog.processor.service.processor import Processor
from ckptlog.processor.service.settings import ServiceSettings


async def restart(
    bootstrap: str, tmp: Path, history: int, created: list[str], snapshot_every: int = 10_000
) -> dict[str, float]:
    """Prints the restart times; returns them too, for bench.report."""
    names = await topics(bootstrap, uuid.uuid4().hex[:6], created)
    root = scratch_root(tmp, names)
    settings = settings_for(bootstrap, names, tmp, root=root, snapshot_every=snapshot_every)
    end = await preload(bootstrap, names["input"], sparse_events(history, root=root))
    log = tmp / f"history-{names['input']}.log"
    started = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(ckptlog_run(settings), stdout=out, stderr=out)
    await wait_committed(bootstrap, settings, end)  # then steady: deletions done, completions folded
    build = time.perf_counter() - started
    proc.send_signal(signal.SIGKILL)  # a crash: no final snapshot
    proc.wait()
    await asyncio.sleep(settings.session_timeout_ms / 1000 + 1)  # let the dead member leave the group
    configure_logging("text", os.environ.get("BENCH_LOG", "CRITICAL"))
    in_process, replayed = await _restore_in_process(settings)
    configure_logging("text", "CRITICAL")
    with log.open("ab") as out:
        spawned = time.perf_counter()
        proc = subprocess.Popen(ckptlog_run(settings), stdout=out, stderr=out)
    whole = await wait_for_line(log, b"event=caught_up", count=2, timeout_s=120) - spawned
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    print(
        f"restart, {history:,} events of history (every 10th report a checkpoint, keep=5; built and settled in "
        f"{build:.0f}s; snapshot every {snapshot_every / 1000:g}k; SIGKILL): {replayed:,} offsets replayed; caught "
        f"up in {in_process:.2f} s in-process, {whole:.2f} s as a new process (spawn -> caught_up)",
        flush=True,
    )
    return {
        "history": history,
        "snapshot_every": snapshot_every,
        "replayed": replayed,
        "in_process": in_process,
        "new_process": whole,
        "build": build,
    }


async def wait_committed(bootstrap: str, settings: ServiceSettings, end: int, quiet_s: float = 3.0) -> None:
    """Until the group's offset passed `end` and then stayed at the log end for `quiet_s`."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=settings.group_id,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    await consumer.start()
    tp = TopicPartition(settings.input_topic, 0)
    quiet_since = None
    try:
        while True:
            committed = await consumer.committed(tp) or 0
            log_end = (await consumer.end_offsets([tp]))[tp]
            steady = committed >= end and committed >= log_end - 1
            quiet_since = (quiet_since or time.monotonic()) if steady else None
            if quiet_since is not None and time.monotonic() - quiet_since >= quiet_s:
                return
            await asyncio.sleep(0.5)
    finally:
        await consumer.stop()


async def _restore_in_process(settings: ServiceSettings) -> tuple[float, int]:
    processor = Processor(settings)
    started = time.perf_counter()
    task = asyncio.create_task(processor.run())
    await processor.ready.wait()
    while not (processor.tasks and all(t.life.live for t in processor.tasks.values())):
        await asyncio.sleep(0.002)
    elapsed = time.perf_counter() - started
    replayed = sum(t.pipeline.publish_from for t in processor.tasks.values()) - sum(
        t.snapshots.last_offset or 0 for t in processor.tasks.values()
    )
    processor.stop()
    await task
    return elapsed, replayed

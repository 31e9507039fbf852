"""kill -9 the processor (a real subprocess) at random points while events flow; restart; compare.

After the last restart: the published views equal the offline fold of the same log, read_committed
outputs hold every id once, every evicted checkpoint directory is gone and every kept, latest and
pending one still exists.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ckptlog.kafka import read_topic
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.harness import expected_views, produce_events, run_argv, wait_for_views, workload
from ckptlog.processor.service.settings import ServiceSettings
from tests.integration.test_processor_e2e import conn_of, make_dirs, make_settings

pytestmark = pytest.mark.timeout(180)

KILLS = 3


def start(settings: ServiceSettings, log: Path) -> subprocess.Popen[bytes]:
    argv = run_argv(settings, group_instance_id="crash-test", snapshot_every=40)
    env = {**os.environ, "CKPTLOG_POLL_TIMEOUT_MS": "50", "CKPTLOG_SESSION_TIMEOUT_MS": "6000"}
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=out, env=env)


def _caught_up(log: Path) -> int:
    return log.read_bytes().count(b"event=caught_up") if log.exists() else 0


async def restored(log: Path, count: int, timeout_s: float = 30.0) -> None:
    """Wait until the log shows `count` partition catch-ups in total (the new instance restored)."""
    deadline = time.monotonic() + timeout_s
    while _caught_up(log) < count:
        assert time.monotonic() < deadline, f"the processor did not restore; see {log}"
        await asyncio.sleep(0.05)


async def test_kill_9_at_random_points_then_restart_equals_offline_fold(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=2)
    lines = workload((tmp_path / "runs").as_uri(), runs=6, reports=360, keep=2, validation_share=0.25, seed=5)
    dirs = make_dirs(lines)
    conn, log = conn_of(settings), tmp_path / "processor.log"
    rng = random.Random(20)

    async def feed() -> None:
        for i in range(0, len(lines), 10):
            await produce_events(conn, settings.input_topic, lines[i : i + 10])
            await asyncio.sleep(rng.uniform(0.05, 0.2))

    feeder = asyncio.create_task(feed())
    proc = start(settings, log)
    try:
        for _ in range(KILLS):  # each instance restores, works a little, and dies mid-stream
            await restored(log, count=_caught_up(log) + 1)
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            seen = _caught_up(log)
            proc = start(settings, log)
        await feeder
        expected = expected_views(lines, settings)
        views = await wait_for_views(conn, settings.state_topic, expected, timeout_s=60)
        if views != expected:
            proc.send_signal(signal.SIGUSR1)  # the processor logs every task's stack
            await asyncio.sleep(1)
        assert views == expected, f"views differ; see {log}"
        evicted = {
            Path(p.removeprefix("file://"))
            for ps in fold_lines(lines, settings.fold_settings()).evicted.values()
            for p in ps
        }
        deadline = time.monotonic() + 30
        while any(p.exists() for p in evicted):
            assert time.monotonic() < deadline, f"evicted checkpoints still exist; see {log}"
            await asyncio.sleep(0.2)
        await restored(log, count=seen + 1)  # a SIGTERM before its handlers are installed would just kill it
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, f"graceful stop failed; see {log}"
    finally:
        feeder.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    kept = {Path(c["path"].removeprefix("file://")) for v in views.values() for c in v["checkpoints"]}
    latest = {Path(v["latest"].removeprefix("file://")) for v in views.values() if v["latest"]}
    pending = {
        Path(c["path"].removeprefix("file://"))
        for v in views.values()
        for c in v["checkpoints"]
        if c["status"] == "PENDING_VALIDATION"
    }
    assert evicted and latest <= kept and pending <= kept
    assert all(p.is_dir() for p in kept), "no kept, latest or pending checkpoint was deleted"
    assert {d for d in dirs if d.exists()} == kept
    outputs = await read_topic(conn, settings.checkpoints_topic)
    ids = Counter(record.value.split(b'"id":"', 1)[1].split(b'"', 1)[0] for record in outputs if record.value)
    assert max(ids.values()) == 1, "exactly_once: no output is visible twice after kill -9"

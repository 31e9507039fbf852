"""Runs end, live (contract §3 "Finished runs"): a real processor and broker, real checkpoints on disk.

A run reports five checkpoints and finishes keeping only the best: the evicted ones are deleted,
the best and latest stay, its final VIEW on the state topic is marked finished. The processor is
restarted (a restore from its snapshot, then the log after it); a late report of the run and a
new run rooted inside its root are dead-lettered, and the final VIEW is still there.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from processor.kafka import read_topic
from processor.kafka.producers import produce
from processor.service.harness import event_record, running
from processor.service.views import read_views
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(120)


async def _until(check: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def test_a_finished_run_keeps_its_best_and_its_final_view_across_a_restart(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, snapshot_every=1)
    conn, root = conn_of(settings), tmp_path / "runs" / "a"
    lines = [f.started("a", root.as_uri(), keep=3, attr="acc")]
    scores = [0.5, 0.9, 0.1, 0.3, 0.2]  # c1 the best, c4 the latest
    for i, score in enumerate(scores):
        (root / f"c{i}").mkdir(parents=True)
        (root / f"c{i}" / "model.pt").write_bytes(b"weights")
        lines.append(f.report("a", {"acc": score}, (root / f"c{i}").as_uri()))
    lines.append(f.finished("a", "best"))

    async def final_view() -> bool:
        view = (await read_views(conn, settings.state_topic)).get("a")
        return view is not None and view.get("finished") is True

    async with running(settings):
        await produce(conn, [event_record(settings.input_topic, line) for line in lines])
        await _until(final_view)
        await _until(lambda: _gone(root, [0, 2, 3]))
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["c1", "c4"]

    late = [f.report("a", {"acc": 1.0}, (root / "c9").as_uri()), f.started("b", (root / "inner").as_uri())]
    async with running(settings):  # restored from its snapshot
        await produce(conn, [event_record(settings.input_topic, line) for line in late])

        async def dead_lettered() -> bool:
            return len(await read_topic(conn, settings.dlq_topic)) >= 2

        await _until(dead_lettered)
    reasons = [dict(r.headers)["__ckptlog.errors.reason"] for r in await read_topic(conn, settings.dlq_topic)]
    assert reasons == [b"run_finished", b"unsafe_storage_root"]
    view = (await read_views(conn, settings.state_topic))["a"]
    assert view["finished"] is True and [c["path"] for c in view["checkpoints"]] == [
        (root / "c4").as_uri(),
        (root / "c1").as_uri(),
    ]
    assert json.loads(json.dumps(view))["committed"] == 5


async def _gone(root: Path, numbers: list[int]) -> bool:
    return not any((root / f"c{i}").exists() for i in numbers)


async def test_a_forgotten_run_leaves_the_state_topic_and_its_checkpoints_in_storage(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    conn, root = conn_of(settings), tmp_path / "runs" / "m"
    lines = [f.started("m", root.as_uri(), keep=None), f.started("n", (tmp_path / "runs" / "n").as_uri())]
    for i in range(2):
        (root / f"c{i}").mkdir(parents=True)
        lines.append(f.report("m", {}, (root / f"c{i}").as_uri()))
    async with running(settings):
        await produce(conn, [event_record(settings.input_topic, line) for line in lines])

        async def both() -> bool:
            return set(await read_views(conn, settings.state_topic)) == {"m", "n"}

        await _until(both)
        await produce(conn, [event_record(settings.input_topic, f.forgotten("m"))])

        async def only_n() -> bool:
            return set(await read_views(conn, settings.state_topic)) == {"n"}

        await _until(only_n)
    assert (root / "c0").is_dir() and (root / "c1").is_dir()

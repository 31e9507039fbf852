"""Two processors in one consumer group share a 2-partition input through rebalances."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.harness import expected_views, produce_events, running, wait_for_views, workload
from tests.integration.test_processor_e2e import conn_of, make_dirs, make_settings

pytestmark = pytest.mark.timeout(120)


async def test_two_instances_through_a_rebalance_equal_the_offline_fold(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(
        topic_factory, kafka_bootstrap, tmp_path, partitions=2, snapshot_every=20, session_timeout_ms=6000
    )
    lines = workload((tmp_path / "runs").as_uri(), runs=6, reports=150, keep=2)
    dirs = make_dirs(lines)
    conn = conn_of(settings)
    thirds = [lines[: len(lines) // 3], lines[: 2 * len(lines) // 3], lines]
    async with running(settings) as first:
        assert len(first.assignment) == 2
        await produce_events(conn, settings.input_topic, thirds[0])
        await wait_for_views(conn, settings.state_topic, expected_views(thirds[0], settings))
        async with running(settings) as second:
            deadline = time.monotonic() + 30
            while not (len(first.assignment) == 1 and len(second.assignment) == 1):
                assert time.monotonic() < deadline, "the group did not split the partitions"
                await asyncio.sleep(0.1)
            await produce_events(conn, settings.input_topic, thirds[1][len(thirds[0]) :])
            expected = expected_views(thirds[1], settings)
            assert await wait_for_views(conn, settings.state_topic, expected) == expected
            assert second.stats().consumed > 0
        await produce_events(conn, settings.input_topic, lines[len(thirds[1]) :])
        expected = expected_views(lines, settings)
        assert await wait_for_views(conn, settings.state_topic, expected) == expected
        evicted = {
            Path(p.removeprefix("file://"))
            for ps in fold_lines(lines, settings.fold_settings()).evicted.values()
            for p in ps
        }
        deadline = time.monotonic() + 20
        while any(p.exists() for p in evicted):
            assert time.monotonic() < deadline, "evicted checkpoints were not all deleted"
            await asyncio.sleep(0.1)
    kept = {Path(c["path"].removeprefix("file://")) for v in expected.values() for c in v["checkpoints"]}
    assert evicted and kept and kept.isdisjoint(evicted)
    assert all(d.exists() == (d not in evicted) for d in dirs)

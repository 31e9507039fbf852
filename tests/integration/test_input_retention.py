"""The input log need not be kept forever (issue 24 item 4, contract §6 and §10): records below the
newest snapshot may go; a restore then needs nothing else, and `history` / `explain` start from the
oldest snapshot the log still reaches and say so. `ckptlog topics` warns about a retention that can
delete what a restore needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ckptlog.cli.topics import input_retention, retention_warnings
from ckptlog.kafka.topics import delete_prefix
from ckptlog.processor.explain.checkpoint import explain
from ckptlog.processor.explain.source import history_of
from ckptlog.processor.service.harness import expected_views, produce_events, running, wait_for_views, workload
from ckptlog.processor.service.settings import load_settings
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(180)


async def test_a_log_truncated_below_the_snapshot_restores_and_explains_from_it(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, snapshot_every=5)
    root = (tmp_path / "runs").as_uri()
    lines = workload(root, runs=2, reports=40, keep=3, validation_share=0.0)  # the paths need not exist
    conn = conn_of(settings)
    first, second = lines[:30], lines[30:]
    async with running(settings):
        await produce_events(conn, settings.input_topic, first)
        expected = expected_views(first, settings)
        assert await wait_for_views(conn, settings.state_topic, expected) == expected
    store = SnapshotStore(settings.snapshots, settings.input_topic, 0)
    newest = max(store.list_offsets())
    assert newest >= 20
    assert await delete_prefix(conn, settings.input_topic, 0, newest) == newest  # everything below the snapshot

    async with running(settings):  # a restore that needs nothing the log lost: no --allow-data-loss
        await produce_events(conn, settings.input_topic, second)
        expected = expected_views(lines, settings)
        assert await wait_for_views(conn, settings.state_topic, expected) == expected

    replayed = await history_of(conn, settings, "run-0")
    assert replayed.snapshot is not None and replayed.snapshot >= newest  # began at a snapshot the log reaches
    steps = replayed.replay.steps["run-0"]
    assert steps and all(step.offset >= newest for step in steps)
    state = replayed.replay.state("run-0")
    assert state is not None
    for checkpoint in expected["run-0"]["checkpoints"]:  # kept, some reported before the log start
        doc = explain("run-0", checkpoint["path"], steps, state)
        assert doc["state"] in ("kept", "latest", "pending", "preserved"), doc
    before = [explain("run-0", c["path"], steps, state)["reported"] for c in expected["run-0"]["checkpoints"]]
    assert any(reported is not None and reported["offset"] is None for reported in before)  # reported before it


async def test_topics_warns_about_an_input_retention_that_can_lose_events(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    conn = conn_of(settings)
    assert retention_warnings(settings, await input_retention(conn, settings)) == []  # the broker's default: 7 days
    short = await topic_factory(1, {"retention.ms": "3600000", "retention.bytes": "1048576"}, prefix="short")
    risky = load_settings(None, **{**settings.model_dump(), "input_topic": short})
    warnings = retention_warnings(risky, await input_retention(conn, risky))
    assert len(warnings) == 2 and "3600 s (retention.ms)" in warnings[0] and "1,048,576 bytes" in warnings[1]
    forever = await topic_factory(1, {"retention.ms": "-1"}, prefix="forever")
    kept = load_settings(None, **{**settings.model_dump(), "input_topic": forever})
    assert retention_warnings(kept, await input_retention(conn, kept)) == []
